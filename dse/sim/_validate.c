/* Every value a Python caller gives the C engine, checked before any is used (issue 33): a Python call
 * never crashes the interpreter, whatever it passes.
 *
 * - the helpers both entries use: a Python int in a range, arrays of ints and doubles in a range
 *   (doubles finite), offsets that start at 0 and never go down, sizes whose product is checked;
 * - the shape table of dse.sim.tables (parse_table): the 32 items _batch.c lists, each buffer's format,
 *   item size and length, every index within what it indexes, every count and flag in range, what a
 *   tracker or cost kernel needs present;
 * - a batch's points and outputs (parse_points, parse_outputs): lengths by checked products, costs
 *   finite and not negative, bandwidths above zero.
 *
 * A refusal is one ValueError or TypeError naming the item (a table's by its slot and name). Each check
 * is O(input), once per call (a table's once per batch_table), never per event. Choices: a bandwidth or
 * greedy bandwidth must be > 0, every time and byte count >= 0 and finite; a dim's NPUs 1 .. 2^31-1 (2 or
 * more on an astra-sim-1 fully connected dim, whose rate divides by P-1); the astra-sim-1 kernel's packet
 * loop at most KERNEL_STEPS per point (beyond: the kernel declines the point, OverflowError, and
 * dse.sim.batch costs it in Python, under its work limit).
 */
#include "_batch.h"
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
        if (off[k] < off[k - 1] + strict) {
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

/* ----- buffers ---------------------------------------------------------------------------------- */
void bufs_release(Bufs *bs) {
    for (int k = 0; k < bs->n; k++) PyBuffer_Release(&bs->b[k]);
    bs->n = 0;
}

/* A C-contiguous buffer of `fmt` items from tuple item k; `want` items (-1: any) or none: NULL, with
 * *len 0 (no exception). NULL with an exception: not a buffer of that format. */
const void *buf(Bufs *bs, PyObject *tup, Py_ssize_t k, const char *fmt, Py_ssize_t want, int writable,
                Py_ssize_t *len) {
    if (len) *len = 0;
    if (bs->n >= (int)(sizeof bs->b / sizeof bs->b[0])) { PyErr_SetString(PyExc_ValueError, "too many buffers"); return NULL; }
    Py_buffer *b = &bs->b[bs->n];
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(tup, k), b, (writable ? PyBUF_WRITABLE : 0) | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS))
        return NULL;
    bs->n++;
    const char *f = b->format ? b->format : "B";
    if (f[0] == '@' || f[0] == '=') f++;
    Py_ssize_t size = fmt[0] == 'B' ? 1 : fmt[0] == 'i' ? 4 : 8;
    Py_ssize_t n = b->itemsize == size ? b->len / size : -1;
    int ok = strcmp(f, fmt) == 0 || (fmt[0] == 'q' && strcmp(f, "l") == 0);
    if (!ok || n < 0 || b->len % size || (want >= 0 && n != want && n != 0)) {
        PyErr_Format(PyExc_ValueError, "batch buffer %zd: format %s with %zd items, wanted %s with %zd", k, f,
                     b->itemsize ? b->len / b->itemsize : 0, fmt, want);
        return NULL;
    }
    if (len) *len = n;
    return n ? b->buf : NULL;
}

/* ----- the shape table -------------------------------------------------------------------------- */
enum { NI = 19, NT = 32 };
/* the items after the header, as dse.sim.tables.ShapeTable._arrays gives them: format and name */
static const char FMT[NT + 1] = "-iddBiiiiiiiiiiiiidiiqiqiidiiqdd";
static const char *const NAME[NT] = {
    "header", "combo_dim", "combo_key", "combo_sent", "combo_fifo", "combo_tied", "plan_off", "plan_combo",
    "slot_of", "chunk_sc", "chunk_cc", "fixed", "perm", "permcode", "thr_idx", "ch_off", "ch_idx", "ch_dim",
    "ch_fac", "dim_steps", "dim_p", "greedy_r", "combo_kind", "combo_c", "dim_algo", "dim_switch", "chk_num",
    "chk_dim", "dim_kind", "dim_links", "dim_nic", "dim_router"};
/* the header's ranges: nd, nchunks, ncombo, norder, nsc, ncc, nchk, tracker, kernel, policy, slots, shared,
 * dimkey, base, seed_latency, highest_first, ag, serialized, endpoint (no fixed service order here) */
static const char *const HNAME[NI] = {
    "batch table nd", "batch table nchunks", "batch table ncombo", "batch table norder", "batch table nsc",
    "batch table ncc", "batch table nchk", "batch table tracker", "batch table kernel", "batch table policy",
    "batch table slots", "batch table shared", "batch table dimkey", "batch table base", "batch table seed_latency",
    "batch table highest_first", "batch table ag", "batch table serialized", "batch table endpoint"};
static const long long HLO[NI] = {1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0, -1, 0, 0, 0, 0, 0};
static const long long HHI[NI] = {8, INT_MAX, INT_MAX, INT_MAX, INT_MAX, INT_MAX, INT_MAX, 2, 3, 2, INT_MAX, 1, 1,
                                  INT_MAX, 1, 1, 1, 1, INT_MAX};
#define KERNEL_INTS (1LL << 61)  /* dse.sim.tables.KERNEL_INTS */

/* Item k has `want` items, or none if not `need`d. */
static int has(const Py_ssize_t *n, int k, Py_ssize_t want, int need) {
    if (n[k] == want || (n[k] == 0 && !need)) return 0;
    PyErr_Format(PyExc_ValueError, "batch table item %d (%s): %zd items, wanted %zd", k, NAME[k], n[k], want);
    return -1;
}

static int bad_table(const char *why) { PyErr_Format(PyExc_ValueError, "batch table: %s", why); return -1; }

/* Every order (a permutation of the dims) has its id in permcode, below norder. */
static int every_order(const Table *tb) {
    int nd = tb->nd, o[8], c[8] = {0};
    for (int i = 0; i < nd; i++) o[i] = i;
    for (int i = 0;;) {  /* Heap's algorithm: each permutation once */
        int code = 0, m = 1;
        for (int j = 0; j < nd; j++) { code += o[j] * m; m *= nd; }
        if (tb->permcode[code] < 0 || tb->permcode[code] >= tb->norder) return bad_table("permcode lacks an order");
        while (i < nd && c[i] >= i) c[i++] = 0;
        if (i >= nd) return 0;
        int j = i % 2 ? c[i] : 0, x = o[j];
        o[j] = o[i]; o[i] = x;
        c[i]++; i = 0;
    }
}

/* The header into tb; 0 or -1. */
static int header(PyObject *ints, Table *tb) {
    long long v[NI];
    if (!PyTuple_Check(ints) || PyTuple_GET_SIZE(ints) != NI) {
        PyErr_SetString(PyExc_TypeError, "batch table item 0 (header) must be a tuple of 19 ints");
        return -1;
    }
    for (int k = 0; k < NI; k++)
        if (v_long(PyTuple_GET_ITEM(ints, k), HLO[k], HHI[k], HNAME[k], &v[k])) return -1;
    tb->nd = (int)v[0]; tb->nchunks = (int)v[1]; tb->ncombo = (int)v[2]; tb->norder = (int)v[3]; tb->nsc = (int)v[4];
    tb->ncc = (int)v[5]; tb->nchk = (int)v[6]; tb->tracker = (int)v[7]; tb->kernel = (int)v[8]; tb->policy = (int)v[9];
    tb->slots = (int)v[10]; tb->shared = (int)v[11]; tb->dimkey = (int)v[12]; tb->base = (int)v[13];
    tb->seed_latency = (int)v[14]; tb->highest_first = (int)v[15]; tb->ag = (int)v[16]; tb->serialized = (int)v[17];
    tb->endpoint = (int)v[18];
    return 0;
}

/* Every item's length, and what the tracker and the kernel need present. */
static int lengths(const Table *tb, const Py_ssize_t *n) {
    int nd = tb->nd, nc = tb->ncombo, load = tb->tracker == LOAD_TRACKER, greedy = tb->tracker == OFFLINE_GREEDY;
    int kern = tb->kernel != K_NONE, bytes = tb->kernel == K_ASTRA || tb->kernel == K_ASTRA1, a1 = tb->kernel == K_ASTRA1;
    Py_ssize_t npo, nco, nthr, nperm, np = 1;
    for (int d = 0; d < nd; d++) np *= nd;
    if (v_mul(tb->norder, tb->nsc, INT_MAX - 1, &npo, "batch table orders x size classes") ||
        v_mul(tb->norder, tb->ncc, INT_MAX - 1, &nco, "batch table orders x charge classes") ||
        v_mul(tb->ncc, nd, INT_MAX, &nthr, "batch table charge classes x dims") ||
        v_mul(tb->norder, nd, INT_MAX, &nperm, "batch table orders x dims"))
        return -1;
    if (load && (kern && tb->kernel != K_PAPER)) return bad_table("the load tracker runs with the paper kernel or none");
    if (!load && tb->nchk) return bad_table("charge combos without the load tracker");
    if (load && (tb->base < 0 || tb->base >= tb->norder)) return bad_table("the load tracker's base order is not an order");
    if (load && tb->nchk > nthr + n[16]) return bad_table("more charge combos than charges");
    Py_ssize_t nch = n[16];
    if (has(n, 1, nc, 1) || has(n, 2, nc, 1) || has(n, 3, nc, 1) || has(n, 4, nc, 1) || has(n, 5, nc, 1) ||
        has(n, 6, npo + 1, 1) || has(n, 8, npo, 1) || has(n, 9, tb->nchunks, 1) || has(n, 10, tb->nchunks, load) ||
        has(n, 11, tb->nchunks, tb->tracker == NO_TRACKER) || has(n, 12, nperm, 1) || has(n, 13, np, 1) ||
        has(n, 14, nthr, load) || has(n, 15, nco + 1, load) || has(n, 17, nch, load) || has(n, 18, nch, load) ||
        has(n, 19, nd, load || kern) || has(n, 20, nd, greedy || kern) || has(n, 21, tb->nchunks, greedy) ||
        has(n, 22, nc, kern) || has(n, 23, nc, bytes) || has(n, 24, nd, kern) || has(n, 25, nd, kern) ||
        has(n, 26, tb->nchk, load && tb->kernel == K_PAPER) || has(n, 27, tb->nchk, load && tb->kernel == K_PAPER) ||
        has(n, 28, nd, a1) || has(n, 29, nd, a1) || has(n, 30, nd, a1) || has(n, 31, nd, a1))
        return -1;
    if (n[7] < npo || n[7] > INT_MAX) return bad_table("plan_combo: a plan position per phase of every plan");
    if (a1 && load) return bad_table("the astra-sim-1 kernel runs without the load tracker");
    return 0;
}

/* Every value within what it indexes or means. */
static int values(Table *tb, const Py_ssize_t *n) {
    int nd = tb->nd, nc = tb->ncombo, load = tb->tracker == LOAD_TRACKER, kern = tb->kernel != K_NONE;
    Py_ssize_t npo = (Py_ssize_t)tb->norder * tb->nsc, nco = (Py_ssize_t)tb->norder * tb->ncc;
    if (v_ints(tb->combo_dim, nc, 0, nd - 1, "combo_dim") || v_doubles(tb->combo_key, nc, -HUGE_VAL, 0, "combo_key") ||
        v_doubles(tb->combo_sent, nc, 0.0, 0, "combo_sent") || v_offsets(tb->plan_off, npo + 1, n[7], 1, "plan_off") ||
        v_ints(tb->plan_combo, n[7], 0, nc - 1, "plan_combo") || v_ints(tb->slot_of, npo, 0, npo - 1, "slot_of") ||
        v_ints(tb->chunk_sc, tb->nchunks, 0, tb->nsc - 1, "chunk_sc") ||
        (tb->fixed && v_ints(tb->fixed, tb->nchunks, 0, tb->norder - 1, "fixed")) ||
        (tb->tracker != NO_TRACKER && every_order(tb)) ||
        v_ints(tb->dim_steps, tb->dim_steps ? nd : 0, 0, INT_MAX, "dim_steps") ||
        v_ints(tb->dim_p, tb->dim_p ? nd : 0, 1, INT_MAX, "dim_p") ||
        v_longs(tb->greedy_r, tb->greedy_r ? tb->nchunks : 0, 0, KERNEL_INTS, "greedy_r"))
        return -1;
    if (load && (v_ints(tb->chunk_cc, tb->nchunks, 0, tb->ncc - 1, "chunk_cc") ||
                 v_ints(tb->thr_idx, (Py_ssize_t)tb->ncc * nd, 0, tb->nchk - 1, "thr_idx") ||
                 v_offsets(tb->ch_off, nco + 1, n[16], 0, "ch_off") ||
                 v_ints(tb->ch_idx, n[16], 0, tb->nchk - 1, "ch_idx") || v_ints(tb->ch_dim, n[16], 0, nd - 1, "ch_dim") ||
                 v_doubles(tb->ch_fac, n[16], -HUGE_VAL, 0, "ch_fac") ||
                 v_doubles(tb->chk_num, n[26], 0.0, 0, "chk_num") || v_ints(tb->chk_dim, n[27], 0, nd - 1, "chk_dim")))
        return -1;
    if (kern && (v_ints(tb->combo_kind, nc, RS, A2A, "combo_kind") || v_ints(tb->dim_algo, nd, A_RING, A_HD, "dim_algo") ||
                 v_ints(tb->dim_switch, nd, 0, 1, "dim_switch") ||
                 v_longs(tb->combo_c, tb->combo_c ? nc : 0, 0, KERNEL_INTS - 1, "combo_c")))
        return -1;
    if (tb->kernel != K_ASTRA1) return 0;
    if (v_ints(tb->dim_kind, nd, D_RING, D_SWITCH, "dim_kind") ||
        v_longs(tb->dim_links, nd, 1, KERNEL_INTS - 1, "dim_links") || v_doubles(tb->dim_nic, nd, 0.0, 0, "dim_nic") ||
        v_doubles(tb->dim_router, nd, 0.0, 0, "dim_router"))
        return -1;
    tb->ksteps = 0;
    for (int d = 0; d < nd; d++)
        if (tb->dim_kind[d] == D_FC && tb->dim_p[d] < 2) return bad_table("a fully connected dim of one NPU");
    for (int k = 0; k < nc; k++) {  /* the packet loop of _kernels.c's a1_serial: at most 2P per phase */
        int d = tb->combo_dim[k];
        if (tb->dim_algo[d] != A_DIRECT && tb->combo_kind[k] != A2A) tb->ksteps += 2LL * tb->dim_p[d] + 64;
    }
    return 0;
}

int parse_table(PyObject *t, Table *tb, Bufs *bs) {
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != NT) {
        PyErr_SetString(PyExc_TypeError, "a batch table is a tuple of 32 items (dse.sim.tables.ShapeTable.packed)");
        return -1;
    }
    memset(tb, 0, sizeof *tb);
    if (header(PyTuple_GET_ITEM(t, 0), tb)) return -1;
    const void *p[NT];
    Py_ssize_t n[NT];
    char fmt[2] = {0, 0};
    for (int k = 1; k < NT; k++) {
        fmt[0] = FMT[k];
        p[k] = buf(bs, t, k, fmt, -1, 0, &n[k]);
        if (!p[k] && PyErr_Occurred()) return -1;
    }
    tb->combo_dim = p[1]; tb->combo_key = p[2]; tb->combo_sent = p[3]; tb->combo_fifo = p[4]; tb->combo_tied = p[5];
    tb->plan_off = p[6]; tb->plan_combo = p[7]; tb->slot_of = p[8]; tb->chunk_sc = p[9]; tb->chunk_cc = p[10];
    tb->fixed = p[11]; tb->nfixed = n[11]; tb->perm = p[12]; tb->permcode = p[13]; tb->thr_idx = p[14];
    tb->ch_off = p[15]; tb->ch_idx = p[16]; tb->ch_dim = p[17]; tb->ch_fac = p[18]; tb->dim_steps = p[19];
    tb->dim_p = p[20]; tb->greedy_r = p[21]; tb->combo_kind = p[22]; tb->combo_c = p[23]; tb->dim_algo = p[24];
    tb->dim_switch = p[25]; tb->chk_num = p[26]; tb->chk_dim = p[27]; tb->dim_kind = p[28]; tb->dim_links = p[29];
    tb->dim_nic = p[30]; tb->dim_router = p[31];
    return lengths(tb, n) || values(tb, n) ? -1 : 0;
}

/* ----- a batch's points and outputs ------------------------------------------------------------- */
static int refuse(const char *why) { PyErr_SetString(PyExc_ValueError, why); return -1; }

int parse_points(PyObject *t, const Table *tb, Points *pt, Bufs *bs) {
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 8) return refuse("batch points are a tuple of 8 items");
    long long np;
    Py_ssize_t nd, nc, nc3, nk, big = PY_SSIZE_T_MAX / 8;
    if (v_long(PyTuple_GET_ITEM(t, 0), 0, big, "the number of points", &np) || v_mul(np, tb->nd, big, &nd, "points x dims") ||
        v_mul(np, tb->ncombo, big, &nc, "points x combos") || v_mul(nc, 3, big, &nc3, "points x ties") ||
        v_mul(np, tb->nchk, big, &nk, "points x charge combos"))
        return -1;
    pt->np = np;
    /* per row: bandwidths and greedy bandwidths > 0, charges and tie offsets any finite, the rest >= 0 */
    const double **row[7] = {&pt->bw, &pt->lat, &pt->busy, &pt->delay, &pt->ties, &pt->bwt, &pt->gbw};
    const Py_ssize_t want[7] = {nd, nd, nc, nc, nc3, nk, nd};
    const double lo[7] = {0.0, 0.0, 0.0, 0.0, -HUGE_VAL, -HUGE_VAL, 0.0};
    static const char *const what[7] = {"points' bandwidths", "points' latencies", "points' busy ns", "points' delays",
                                        "points' tie offsets", "points' charges", "points' greedy bandwidths"};
    for (int k = 0; k < 7; k++) {
        *row[k] = buf(bs, t, k + 1, "d", want[k], 0, NULL);
        if (PyErr_Occurred() || (*row[k] && v_doubles(*row[k], want[k], lo[k], k == 0 || k == 6, what[k]))) return -1;
    }
    if (np == 0) return 0;
    int kernel = tb->kernel != K_NONE;
    if ((kernel && (!pt->bw || !pt->lat)) || (!kernel && (!pt->busy || !pt->delay))) return refuse("points lack their costs");
    if (tb->tracker == LOAD_TRACKER && !(kernel ? pt->lat != NULL : pt->bwt != NULL))
        return refuse("points lack the tracker's charges");
    if (tb->tracker == LOAD_TRACKER && !kernel && tb->seed_latency && !pt->lat) return refuse("points lack latencies");
    if (tb->tracker == OFFLINE_GREEDY && !pt->gbw && !(kernel && pt->bw)) return refuse("points lack the greedy bandwidths");
    return 0;
}

int parse_outputs(PyObject *t, const Table *tb, const Points *pt, Outs *out, Bufs *bs) {
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 4) return refuse("batch outputs are a tuple of 4 buffers");
    Py_ssize_t nd, no, big = PY_SSIZE_T_MAX / 8;
    if (v_mul(pt->np, tb->nd, big, &nd, "points x dims") || v_mul(pt->np, tb->nchunks, big, &no, "points x chunks"))
        return -1;
    double **row[3] = {&out->time, &out->busy, &out->bytes};
    const Py_ssize_t want[3] = {pt->np, nd, nd};
    for (int k = 0; k < 3; k++) {
        *row[k] = (double *)buf(bs, t, k, "d", want[k], 1, NULL);
        if (PyErr_Occurred()) return -1;
        if (pt->np && !*row[k]) return refuse("outputs missing");
    }
    out->orders = (int *)buf(bs, t, 3, "i", no, 1, NULL);
    return PyErr_Occurred() ? -1 : 0;
}
