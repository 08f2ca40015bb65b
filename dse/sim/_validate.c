/* The checks every C entry point runs on what a Python caller gives it, before any value is used: a
 * Python int in a range, arrays of ints and doubles in a range (doubles finite), offsets that start at 0
 * and never go down, sizes whose product is checked. A refusal is one ValueError or TypeError naming the
 * item; each check is O(input), once per call, never per event. (The shape and the points of the
 * compiled path are checked with these in _shape.c.)
 */
#include "_engine.h"
#include <limits.h>
#include <math.h>

/* ----- the helpers ------------------------------------------------------------------------------ */
int v_long(PyObject *o, long long lo, long long hi, const char *what, long long *out) {
    if (!PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %.60s", what, Py_TYPE(o)->tp_name);
        return -1;
    }
    int over = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &over);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (over || v < lo || v > hi) {
        PyErr_Format(PyExc_ValueError, "%s is %R, not in [%lld, %lld]", what, o, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int out_of(const char *what, Py_ssize_t k, long long v, long long lo, long long hi) {
    PyErr_Format(PyExc_ValueError, "%s: item %zd is %lld, not in [%lld, %lld]", what, k, v, lo, hi);
    return -1;
}

int v_ints(const int *v, Py_ssize_t n, long long lo, long long hi, const char *what) {
    for (Py_ssize_t k = 0; k < n; k++)
        if (v[k] < lo || v[k] > hi) return out_of(what, k, v[k], lo, hi);
    return 0;
}

int v_longs(const long long *v, Py_ssize_t n, long long lo, long long hi, const char *what) {
    for (Py_ssize_t k = 0; k < n; k++)
        if (v[k] < lo || v[k] > hi) return out_of(what, k, v[k], lo, hi);
    return 0;
}

/* Each v[k] finite, >= lo, and > 0 as well if `positive`; 0 or -1 (ValueError). */
int v_doubles(const double *v, Py_ssize_t n, double lo, int positive, const char *what) {
    for (Py_ssize_t k = 0; k < n; k++) {
        if (isfinite(v[k]) && v[k] >= lo && (!positive || v[k] > 0.0)) continue;
        PyObject *x = PyFloat_FromDouble(v[k]);
        if (x) PyErr_Format(PyExc_ValueError, "%s: item %zd is %R, not a finite number %s", what, k, x,
                            positive ? "> 0" : lo >= 0.0 ? ">= 0" : "");
        Py_XDECREF(x);
        return -1;
    }
    return 0;
}

/* off[0] == 0, off[n - 1] == total, never decreasing (strictly increasing if `strict`). */
int v_offsets(const int *off, Py_ssize_t n, Py_ssize_t total, int strict, const char *what) {
    if (n < 1 || off[0] != 0 || off[n - 1] != total) {
        PyErr_Format(PyExc_ValueError, "%s: offsets must run from 0 to %zd", what, total);
        return -1;
    }
    for (Py_ssize_t k = 1; k < n; k++)
        if ((long long)off[k] < (long long)off[k - 1] + strict) {
            PyErr_Format(PyExc_ValueError, "%s: offset %zd is %d after %d (an empty or negative span)", what, k,
                         off[k], off[k - 1]);
            return -1;
        }
    return 0;
}

/* *out = a * b, both >= 0, if it is at most `cap`; else -1 (ValueError). */
int v_mul(Py_ssize_t a, Py_ssize_t b, Py_ssize_t cap, Py_ssize_t *out, const char *what) {
    if (a < 0 || b < 0 || (b && a > cap / b)) {
        PyErr_Format(PyExc_ValueError, "%s: %zd x %zd is more than %zd", what, a, b, cap);
        return -1;
    }
    *out = a * b;
    return 0;
}
