/* The cost kernels of the compiled path (dse/sim/_batch.c): per point, what a cost model's own methods
 * give the derived combos (`CostModel._make_phase`: busy, delay, tie offsets) and dims
 * (`greedy_bandwidth`), to the bit, from the point's bandwidths and latencies and the shape's constants.
 * `paper` and `astra-sim` in doubles, as their Python computes; `astra-sim-1` in integers, as
 * dse/costs/astra_sim1.py's phase_timing does with Python's.
 *
 * batch_costs(table, size, chunks, bw, lat) -> (combos, busy, delay, ties, gbw): one point's, as lists
 *   (combos a list of (dim, kind code, bytes in), the rest tuples; ties three a combo), for the tests.
 */
#include "_batch.h"
#include <math.h>

/* ----- paper and astra-sim (dse/costs/paper.py, astra_sim.py) ---------------------------------- */
static double astra_phase(const Shape *tb, int d, int kind, long long c, double bw, double lat) {
    long long p = tb->dim_p[d], e = tb->endpoint;
    double beta = bw * GIB / 1e9;
    double hop = (tb->dim_switch[d] ? 2.0 : 1.0) * lat;
    int algo = tb->dim_algo[d];
    if (kind == A2A) {
        if (algo == A_RING) {
            long long s = p * (p - 1) / 2;
            return (double)s * (hop + floor((double)(c / p) / beta)) + (double)(e * (s + 1));
        }
        return hop + floor((double)(c / p) / beta) + (double)(2 * e);
    }
    if (algo == A_RING) {
        if (kind == AG) return (double)(p - 1) * (hop + floor((double)c / beta)) + (double)(e * p);
        if (kind == AR) return (double)(2 * (p - 1)) * (hop + floor((double)(c / p) / beta)) + (double)(e * (2 * p - 1));
        return (double)(p - 1) * (hop + floor((double)(c / p) / beta)) + (double)(e * p);
    }
    if (algo == A_DIRECT) {
        if (kind == AG) return hop + floor((double)c / beta) + (double)(2 * e);
        if (kind == AR) return 2.0 * hop + 2.0 * floor((double)(c / p) / beta) + (double)(3 * e);
        return hop + floor((double)(c / p) / beta) + (double)(2 * e);
    }
    int steps = 0;
    while ((1LL << (steps + 1)) <= p) steps++;
    double sum = 0.0;
    if (kind == AG) {
        for (int k = 0; k < steps; k++) sum += floor(ldexp((double)c, k) / beta);
        return ((double)steps * hop + sum) + (double)(e * (steps + 1));
    }
    for (int k = 1; k <= steps; k++) sum += floor((double)(c >> k) / beta);
    double rs = (double)steps * hop + sum;
    if (kind == AR) {
        long long q = c / p;
        double s2 = 0.0;
        for (int k = 0; k < steps; k++) s2 += floor(ldexp((double)q, k) / beta);
        return ((rs + (double)steps * hop) + s2) + (double)(e * (2 * steps + 1));
    }
    return rs + (double)(e * (steps + 1));
}

/* ----- astra-sim-1: phase_timing, message_rate, greedy_bandwidth of dse/costs/astra_sim1.py ------- */
/* Python's integers never overflow; here every value stays below LIM, so that a sum of two fits in
 * int64, and a point whose times would not is refused (-1: dse.sim.batch costs it in Python). */
#define LIM (1LL << 61)

/* One dim at one point: its shape constants, its message rate (B/ns), and whether a value left range. */
typedef struct { long long p; int kind, algo, err; double rate, lat, nic, router; } A1;

/* int(x) for 0 <= x < LIM (Python truncates towards zero); anything else, NaN too, flags the dim. */
static long long a1_int(A1 *a, double x) {
    if (!(x >= 0.0 && x < (double)LIM)) { a->err = 1; return 0; }
    return (long long)x;
}

static long long a1_add(A1 *a, long long x, long long y) {  /* x, y in [0, LIM) */
    long long s = x + y;
    if (s >= LIM) { a->err = 1; return 0; }
    return s;
}

static long long a1_shl(A1 *a, long long x, long long k) {
    if (x > (LIM - 1) >> k) { a->err = 1; return 0; }
    return x << k;
}

static long long proc(long long m) { return 3 * (m / 500000); }  /* ns to reduce an m-byte packet */

/* One message of m bytes to the NPU `distance` away (`msg` in phase_timing, docs/model.md §4.3). */
static long long a1_msg(A1 *a, long long m, long long distance) {
    long long hops = 2;
    if (a->kind == D_FC) hops = 1;
    else if (a->kind == D_RING) {
        distance %= a->p;
        hops = distance < a->p - distance ? distance : a->p - distance;
    }
    long long t = a1_int(a, (double)hops * a->lat);
    t = a1_int(a, (double)t + (double)m / a->rate);
    t = a1_int(a, (double)t + 2.0 * a->nic);
    return a->kind == D_SWITCH ? a1_int(a, (double)t + a->router) : t;
}

/* A direct phase, or any all-to-all: all peers at once. On a ring the farthest (P/2 away) message is
 * the longest of the peers' (Python takes the max): msg never decreases with the hops. */
static long long a1_direct(A1 *a, int kind, long long c, long long *tie) {
    long long m = kind == AG ? c : c / a->p;
    long long cm = a1_msg(a, m, a->kind == D_RING ? a->p / 2 : 1);
    long long send = 1, recv = a1_add(a, 1, cm);
    if (kind == AR) {  /* a reduced direct RS round, then an unreduced AG round */
        send = a1_add(a, recv, 1 + proc(m));
        recv = a1_add(a, send, cm);
        tie[0] = tie[1] = recv; tie[2] = send;
        return a1_add(a, recv, 1);
    }
    long long pr = kind == RS ? proc(m) : 0;
    tie[0] = recv + (pr ? 1 : 0); tie[1] = recv; tie[2] = send;
    return a1_add(a, recv, 1 + pr);
}

/* Send i of a packet-serial phase: its bytes, and the distance into *dist (`sends` in phase_timing). */
static long long a1_send(A1 *a, int kind, long long c, long long i, long long steps, long long *dist) {
    if (a->algo == A_RING) { *dist = 1; return kind == AG ? c : c / a->p; }
    if (kind == AG) { *dist = 1LL << i; return a1_shl(a, c, i); }
    if (i < steps) { *dist = a->p >> (i + 1); return c >> (i + 1); }  /* halving: c // 2^(i+1) */
    *dist = 1LL << (i - steps);  /* an all-reduce's doubling half, from c // 2^steps */
    return a1_shl(a, c >> steps, i - steps);
}

/* A ring or halving-doubling phase, one message in flight: n releases from refills of a zero-latency
 * packet and nz others, release n closing the phase (the loop of phase_timing, docs/model.md §4.3). */
static long long a1_serial(A1 *a, int kind, long long c, long long *tie) {
    long long steps = 0, nz, n;
    while ((2LL << steps) <= a->p) steps++;  /* log2 P: halving-doubling needs a power of two */
    if (a->algo == A_RING) { nz = a->p - 1; n = kind == AR ? 2 * nz : nz; }
    else { nz = steps - 1; n = kind == AR ? 2 * steps : steps; }
    long long ring_cm = a->algo == A_RING ? a1_msg(a, kind == AG ? c : c / a->p, 1) : 0;  /* rings repeat it */
    long long t = 0, last_send = 0, last_recv = 0, pr = 0, slot = 0, refill = 0, dist;
    for (long long i = 0; i <= n && !a->err; i++) {
        long long m = a1_send(a, kind, c, i < n ? i : n - 1, steps, &dist);
        /* slot 0 is the zero-latency packet; the others are reduced in RS, and in AR in even refills */
        int reduced = slot != 0 && (kind == RS || (kind == AR && refill % 2 == 0));
        pr = reduced ? proc(m) : 0;
        t = a1_add(a, t, 1 + pr);
        if (i < n) {
            last_send = t;
            t = a1_add(a, t, a->algo == A_RING ? ring_cm : a1_msg(a, m, dist));
            last_recv = t;
        }
        if (++slot == nz + 1) { slot = 0; refill++; }
    }
    tie[0] = last_recv + (pr ? 1 : 0); tie[1] = last_recv; tie[2] = last_send;
    return t;
}

/* Dim d at this point: its constants and rate (message_rate, left to right), its greedy_bandwidth. */
static void a1_dim(const Shape *tb, int d, double bw, double lat, A1 *a, double *gbw) {
    long long links = tb->dim_links[d], p = tb->dim_p[d];
    int kind = tb->dim_kind[d];
    long long scalar = kind == D_RING ? links - links % 2 : kind == D_FC ? links / (p - 1) : links;  /* rate_scalar */
    a->p = p; a->kind = kind; a->algo = tb->dim_algo[d]; a->err = 0;
    a->lat = lat; a->nic = tb->dim_nic[d]; a->router = tb->dim_router[d];
    a->rate = bw / (double)links * GIB / 1e9 * (double)scalar;
    *gbw = (double)(kind == D_FC ? scalar * (p - 1) : scalar) * (bw / (double)links);
}

/* Every combo's _make_phase: busy = the phase's end, no delay, ties (registration, last receive, last send). */
static int astra1_costs(const Shape *tb, const Derived *dv, const double *bw, const double *lat, double *busy,
                        double *delay, double *t123, double *gbw) {
    A1 a[MAX_ND];
    int nc = dv->ncombo;
    for (int d = 0; d < tb->nd; d++) a1_dim(tb, d, bw[d], lat[d], &a[d], &gbw[d]);
    for (int k = 0; k < nc; k++) {
        A1 *x = &a[dv->combo_dim[k]];
        long long tie[3], c = dv->combo_c[k], end;
        int kind = dv->combo_kind[k];
        if (c < 0 || c >= LIM) return -4;
        end = x->algo == A_DIRECT || kind == A2A ? a1_direct(x, kind, c, tie) : a1_serial(x, kind, c, tie);
        if (x->err) return -4;
        busy[k] = (double)end; delay[k] = 0.0;
        t123[k] = (double)tie[0]; t123[nc + k] = (double)tie[1]; t123[2 * nc + k] = (double)tie[2];
    }
    return 0;
}

/* ----- the entry points ------------------------------------------------------------------------- */
int costs(const Shape *tb, const Derived *dv, const double *bw, const double *lat, double *busy, double *delay,
          double *t123, double *gbw) {
    if (tb->kernel == K_ASTRA1) return astra1_costs(tb, dv, bw, lat, busy, delay, t123, gbw);
    for (int d = 0; d < tb->nd; d++) gbw[d] = bw[d];  /* their greedy_bandwidth: the bandwidth */
    if (tb->kernel == K_PAPER) {
        for (int k = 0; k < dv->ncombo; k++) {
            int d = dv->combo_dim[k];
            double l = (double)tb->dim_steps[d] * lat[d];
            if (dv->combo_kind[k] == AR) l = 2.0 * l;
            double transfer = dv->combo_sent[k] / bw[d];
            if (tb->serialized) { busy[k] = transfer + l; delay[k] = 0.0; }
            else { busy[k] = transfer; delay[k] = l; }
        }
        return 0;
    }
    for (int k = 0; k < dv->ncombo; k++) {
        int d = dv->combo_dim[k];
        busy[k] = astra_phase(tb, d, dv->combo_kind[k], dv->combo_c[k], bw[d], lat[d]);
        delay[k] = 0.0;
    }
    return 0;
}

/* The combos as (dim, kind code, bytes in): an int for the integer kernels, a float for the paper's. */
static PyObject *combo_list(const Shape *sh, const Derived *dv) {
    PyObject *l = PyList_New(dv->ncombo);
    for (int k = 0; l && k < dv->ncombo; k++) {
        PyObject *c = sh->kernel == K_PAPER ? Py_BuildValue("(iid)", dv->combo_dim[k], dv->combo_kind[k], dv->combo_cf[k])
                                            : Py_BuildValue("(iiL)", dv->combo_dim[k], dv->combo_kind[k], dv->combo_c[k]);
        if (!c) { Py_DECREF(l); return NULL; }
        PyList_SET_ITEM(l, k, c);
    }
    return l;
}

/* batch_costs on a derived shape: v holds busy, delay, t123 (3 nc), ties (3 nc), gbw (nd). */
PyObject *point_costs(const Shape *sh, const Derived *dv, const double *bw, const double *lat) {
    int nc = dv->ncombo;
    double *v = calloc((size_t)(8 * nc + sh->nd), sizeof(double));
    if (!v) return PyErr_NoMemory();
    double *t123 = v + 2 * nc, *ties = v + 5 * nc, *gbw = v + 8 * nc;
    PyObject *out = NULL;
    if (costs(sh, dv, bw, lat, v, v + nc, t123, gbw)) {
        PyErr_SetString(PyExc_OverflowError, "a point beyond the cost kernel's integers or steps");
    } else {
        for (int k = 0; k < nc; k++)
            for (int j = 0; j < 3; j++) ties[3 * k + j] = t123[j * nc + k];
        out = Py_BuildValue("(NNNNN)", combo_list(sh, dv), float_tuple(v, nc), float_tuple(v + nc, nc), float_tuple(ties, 3 * nc),
                            float_tuple(gbw, sh->nd));
    }
    free(v);
    return out;
}
