/* The shape of the compiled path, read by field name (dse.sim.compiled.Shape.fields gives a dict; the
 * names are declared here once, in FIELDS, and `batch_table()` returns them), and a batch's points and
 * outputs. Every value is checked before use: a scalar within its range, an array's format and length,
 * every index within what it indexes, every order a permutation with its id. A refusal is one ValueError
 * or TypeError naming the field; a Python call never crashes the interpreter, whatever it passes. */
#include "_batch.h"
#include <limits.h>
#include <math.h>
#include <stddef.h>

/* ----- buffers ---------------------------------------------------------------------------------- */
void bufs_release(Bufs *bs) {
    for (int k = 0; k < bs->n; k++) PyBuffer_Release(&bs->b[k]);
    bs->n = 0;
}

/* A C-contiguous buffer of `fmt` items from o: `want` items (-1: any; 0 items are always accepted: NULL
 * with *len 0 and no exception). NULL with an exception: not a buffer of that format or length. */
const void *buf_item(Bufs *bs, PyObject *o, const char *what, const char *fmt, Py_ssize_t want, int writable,
                     Py_ssize_t *len) {
    if (len) *len = 0;
    if (bs->n >= (int)(sizeof bs->b / sizeof bs->b[0])) { PyErr_SetString(PyExc_ValueError, "too many buffers"); return NULL; }
    Py_buffer *b = &bs->b[bs->n];
    if (PyObject_GetBuffer(o, b, (writable ? PyBUF_WRITABLE : 0) | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS)) return NULL;
    bs->n++;
    const char *f = b->format ? b->format : "B";
    if (f[0] == '@' || f[0] == '=') f++;
    Py_ssize_t size = fmt[0] == 'B' ? 1 : fmt[0] == 'i' ? 4 : 8;
    Py_ssize_t n = b->itemsize == size ? b->len / size : -1;
    int ok = strcmp(f, fmt) == 0 || (fmt[0] == 'q' && strcmp(f, "l") == 0);
    if (!ok || n < 0 || b->len % size || (want >= 0 && n != want && n != 0)) {
        PyErr_Format(PyExc_ValueError, "%s: format %s with %zd items, wanted %s with %zd", what, f,
                     b->itemsize ? b->len / b->itemsize : 0, fmt, want);
        return NULL;
    }
    if (len) *len = n;
    return n ? b->buf : NULL;
}

/* ----- the fields ------------------------------------------------------------------------------- */
/* type: 'n' an int, 'L' a long long, 'f' a double (each a Python number), or an array of 'i', 'q', 'd';
 * an array's items within [lo, hi] (doubles: finite and >= 0). FI_<name> is a field's index. */
#define SHAPE_FIELDS(X)                                                                                       \
    X(nd, 'n', 1, MAX_ND) X(norder, 'n', 1, INT_MAX) X(tracker, 'n', NO_TRACKER, OFFLINE_GREEDY)              \
    X(kernel, 'n', K_PAPER, K_ASTRA1) X(coll, 'n', RS, A2A) X(baseline, 'n', 0, 1) X(policy, 'n', FIFO, SCF_ASTRA) \
    X(slots, 'n', 1, INT_MAX) X(shared, 'n', 0, 1) X(dimkey, 'n', 0, 1) X(base, 'n', -1, INT_MAX)               \
    X(seed_latency, 'n', 0, 1) X(serialized, 'n', 0, 1) X(ag_div, 'n', 0, 1) X(fifo_a2a, 'n', 0, 1)            \
    X(tied, 'n', 0, 1) X(npus, 'L', 1, KERNEL_INTS) X(endpoint, 'L', 0, INT_MAX) X(thr_frac, 'f', 0, 0)          \
    X(perm, 'i', 0, MAX_ND - 1) X(permcode, 'i', -1, INT_MAX) X(step_off, 'i', 0, INT_MAX)                     \
    X(step_dim, 'i', 0, MAX_ND - 1) X(step_kind, 'i', RS, A2A) X(prefix, 'i', 0, INT_MAX)                      \
    X(dim_steps, 'i', 0, INT_MAX) X(dim_p, 'i', 2, INT_MAX) X(dim_algo, 'i', A_RING, A_HD)                     \
    X(dim_switch, 'i', 0, 1) X(dim_kind, 'i', D_RING, D_SWITCH) X(dim_links, 'q', 1, KERNEL_INTS - 1)         \
    X(dim_nic, 'd', 0, 0) X(dim_router, 'd', 0, 0)
typedef struct { const char *name; char type; size_t off; long long lo, hi; } Field;
#define FIELD_ROW(name, type, lo, hi) {#name, type, offsetof(Shape, name), lo, hi},
#define FIELD_INDEX(name, type, lo, hi) FI_##name,
static const Field FIELDS[] = {SHAPE_FIELDS(FIELD_ROW)};
enum { SHAPE_FIELDS(FIELD_INDEX) NFIELDS };

PyObject *shape_field_names(void) {
    PyObject *t = PyTuple_New(NFIELDS);
    for (int k = 0; t && k < NFIELDS; k++) {
        PyObject *s = PyUnicode_FromString(FIELDS[k].name);
        if (!s) { Py_DECREF(t); return NULL; }
        PyTuple_SET_ITEM(t, k, s);
    }
    return t;
}

static int bad(const char *why) { PyErr_Format(PyExc_ValueError, "batch table: %s", why); return -1; }

/* One field from the dict into sh (arrays: their length into *len). */
static int field(PyObject *dict, const Field *f, Shape *sh, Bufs *bs, Py_ssize_t *len) {
    PyObject *o = PyDict_GetItemString(dict, f->name);
    char *at = (char *)sh + f->off;
    *len = 0;
    if (!o) { PyErr_Format(PyExc_ValueError, "batch table: no field %s", f->name); return -1; }
    if (f->type == 'f') {
        double v = PyFloat_AsDouble(o);
        if (v == -1.0 && PyErr_Occurred()) return -1;
        if (!isfinite(v) || v < 0.0) return bad("thr_frac is not a finite number >= 0");
        *(double *)at = v;
        return 0;
    }
    if (f->type == 'n' || f->type == 'L') {
        long long v;
        if (v_long(o, f->lo, f->hi, f->name, &v)) return -1;
        if (f->type == 'n') *(int *)at = (int)v; else *(long long *)at = v;
        return 0;
    }
    char fmt[2] = {f->type, 0};
    const void *p = buf_item(bs, o, f->name, fmt, -1, 0, len);
    if (!p && PyErr_Occurred()) return -1;
    *(const void **)at = p;
    if (f->type == 'i') return v_ints(p, *len, f->lo, f->hi, f->name);
    if (f->type == 'q') return v_longs(p, *len, f->lo, f->hi, f->name);
    return v_doubles(p, *len, 0.0, 0, f->name);
}

/* Every order a permutation whose code names it; with a tracker, every permutation has an id. */
static int orders(const Shape *sh) {
    int nd = sh->nd;
    Py_ssize_t ncode = 1, found = 0;
    for (int d = 0; d < nd; d++) ncode *= nd;
    for (int o = 0; o < sh->norder; o++) {
        unsigned seen = 0;
        int code = 0, m = 1;
        for (int i = 0; i < nd; i++) {
            int d = sh->perm[o * nd + i];
            if (d >= nd || seen >> d & 1) return bad("an order that is not a permutation of the dims");
            seen |= 1u << d; code += d * m; m *= nd;
        }
        if (sh->permcode[code] != o) return bad("permcode does not name every order");
    }
    for (Py_ssize_t c = 0; c < ncode; c++) {
        if (sh->permcode[c] >= sh->norder) return bad("permcode names an order that is not there");
        found += sh->permcode[c] >= 0;
    }
    if (found != sh->norder) return bad("permcode names an order twice");
    Py_ssize_t all = 1;
    for (int k = 2; k <= nd; k++) all *= k;
    if (sh->tracker != NO_TRACKER && sh->norder != all) return bad("a tracker needs every order");
    return 0;
}

/* How many items array field k must have (-1: any), and whether it may be empty instead. */
static Py_ssize_t wanted(const Shape *sh, int k, int *optional) {
    Py_ssize_t ncode = 1;
    for (int d = 0; d < sh->nd; d++) ncode *= sh->nd;
    *optional = 0;
    switch (k) {
    case FI_perm: return (Py_ssize_t)sh->norder * sh->nd;
    case FI_permcode: return ncode;
    case FI_step_off: return sh->norder + 1;
    case FI_step_dim: case FI_step_kind: case FI_prefix: return -1;
    case FI_dim_steps: case FI_dim_p: return sh->nd;
    case FI_dim_algo: case FI_dim_switch: *optional = sh->kernel == K_PAPER; return sh->nd;
    default: *optional = sh->kernel != K_ASTRA1; return sh->nd;  /* astra-sim-1's dims */
    }
}

/* Lengths and the rules between fields. */
static int consistent(const Shape *sh, const Py_ssize_t *n) {
    int nd = sh->nd, optional;
    for (int k = FI_perm; k < NFIELDS; k++) {
        Py_ssize_t want = wanted(sh, k, &optional);
        if (want >= 0 && n[k] != want && !(optional && n[k] == 0)) {
            PyErr_Format(PyExc_ValueError, "batch table: %s has %zd items, wanted %zd", FIELDS[k].name, n[k], want);
            return -1;
        }
    }
    if (v_offsets(sh->step_off, sh->norder + 1, n[FI_step_dim], 1, "step_off")) return -1;
    if (n[FI_step_kind] != n[FI_step_dim]) return bad("step_kind and step_dim differ in length");
    for (Py_ssize_t j = 0; j < n[FI_step_dim]; j++)
        if (sh->step_dim[j] >= nd) return bad("a step on a dim that is not there");
    if ((sh->tracker == NO_TRACKER) != (n[FI_prefix] > 0)) return bad("a prefix of orders goes with no tracker, and only with it");
    if (v_ints(sh->prefix, n[FI_prefix], 0, sh->norder - 1, "prefix")) return -1;
    if (sh->tracker == LOAD_TRACKER && (sh->kernel != K_PAPER || sh->base < 0 || sh->base >= sh->norder))
        return bad("the load tracker runs with the paper kernel and a base order");
    if (sh->kernel == K_ASTRA1)
        for (int d = 0; d < nd; d++)
            if (sh->dim_kind[d] == D_FC && sh->dim_p[d] < 2) return bad("a fully connected dim of one NPU");
    return orders(sh);
}

int parse_shape(PyObject *dict, Shape *sh, Bufs *bs) {
    if (!PyDict_Check(dict)) { PyErr_SetString(PyExc_TypeError, "a batch table is a dict of its fields"); return -1; }
    memset(sh, 0, sizeof *sh);
    Py_ssize_t n[NFIELDS], pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        int known = 0;
        for (int k = 0; k < NFIELDS && !known; k++) known = PyUnicode_Check(key) && PyUnicode_CompareWithASCIIString(key, FIELDS[k].name) == 0;
        if (!known) { PyErr_Format(PyExc_ValueError, "batch table: unknown field %R", key); return -1; }
    }
    for (int k = 0; k < NFIELDS; k++) if (field(dict, &FIELDS[k], sh, bs, &n[k])) return -1;
    sh->nstep = n[FI_step_dim];
    sh->nprefix = n[FI_prefix];
    return consistent(sh, n);
}

/* ----- a batch's points and outputs ------------------------------------------------------------- */
static int refuse(const char *why) { PyErr_SetString(PyExc_ValueError, why); return -1; }

int v_rows(const double *bw, const double *lat, Py_ssize_t n) {
    for (Py_ssize_t k = 0; k < n; k++) {
        if (!(bw[k] >= MIN_BW && bw[k] <= MAX_BW)) return refuse("a bandwidth out of 1e-09 to 1e+09 GB/s");
        if (!(lat[k] >= 0.0 && lat[k] <= MAX_LAT)) return refuse("a latency out of 0 to 1e+15 ns");
    }
    return 0;
}

int parse_points(PyObject *t, const Shape *sh, Points *pt, Bufs *bs) {
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 6) return refuse("batch points are a tuple of 6 items");
    long long np;
    Py_ssize_t nd, big = PY_SSIZE_T_MAX / 8;
    if (v_long(PyTuple_GET_ITEM(t, 0), 0, big, "the number of points", &np) || v_mul(np, sh->nd, big, &nd, "points x dims"))
        return -1;
    pt->np = np;
    pt->size = buf_item(bs, PyTuple_GET_ITEM(t, 1), "points' sizes", "q", np, 0, NULL);
    if (PyErr_Occurred()) return -1;
    pt->chunks = buf_item(bs, PyTuple_GET_ITEM(t, 2), "points' chunks", "q", np, 0, NULL);
    if (PyErr_Occurred()) return -1;
    pt->bw = buf_item(bs, PyTuple_GET_ITEM(t, 3), "points' bandwidths", "d", nd, 0, NULL);
    if (PyErr_Occurred()) return -1;
    pt->lat = buf_item(bs, PyTuple_GET_ITEM(t, 4), "points' latencies", "d", nd, 0, NULL);
    if (PyErr_Occurred()) return -1;
    pt->order_off = buf_item(bs, PyTuple_GET_ITEM(t, 5), "points' order offsets", "q", np + 1, 0, NULL);
    if (PyErr_Occurred()) return -1;
    if (np == 0) return 0;
    if (!pt->size || !pt->chunks || !pt->bw || !pt->lat || !pt->order_off) return refuse("points lack a row");
    if (v_longs(pt->size, np, 1, KERNEL_INTS, "points' sizes") || v_longs(pt->chunks, np, 1, INT_MAX, "points' chunks") ||
        v_rows(pt->bw, pt->lat, nd))
        return -1;
    for (Py_ssize_t p = 0; p < np; p++)
        if (pt->chunks[p] > pt->size[p]) return refuse("a point has more chunks than bytes");
    if (pt->order_off[0] != 0) return refuse("points' order offsets must start at 0");
    for (Py_ssize_t p = 0; p < np; p++)
        if (pt->order_off[p + 1] < pt->order_off[p]) return refuse("points' order offsets go down");
    return 0;
}

int parse_outputs(PyObject *t, const Shape *sh, const Points *pt, Outs *out, Bufs *bs) {
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 5) return refuse("batch outputs are a tuple of 5 buffers");
    Py_ssize_t nd, big = PY_SSIZE_T_MAX / 8;
    if (v_mul(pt->np, sh->nd, big, &nd, "points x dims")) return -1;
    double **row[3] = {&out->time, &out->busy, &out->bytes};
    const Py_ssize_t want[3] = {pt->np, nd, nd};
    static const char *const what[3] = {"times", "busy ns", "bytes"};
    for (int k = 0; k < 3; k++) {
        *row[k] = (double *)buf_item(bs, PyTuple_GET_ITEM(t, k), what[k], "d", want[k], 1, NULL);
        if (PyErr_Occurred()) return -1;
        if (pt->np && !*row[k]) return refuse("outputs missing");
    }
    out->nch = (int *)buf_item(bs, PyTuple_GET_ITEM(t, 3), "chunk counts", "i", pt->np, 1, NULL);
    if (PyErr_Occurred()) return -1;
    out->orders = (int *)buf_item(bs, PyTuple_GET_ITEM(t, 4), "orders", "i", -1, 1, &out->norders);
    if (PyErr_Occurred()) return -1;
    if (pt->np && (!out->nch || out->norders < pt->order_off[pt->np])) return refuse("outputs too small");
    return 0;
}
