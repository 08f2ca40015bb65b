/* The compiled path of dse.sim.compiled: a shape (what many points share, parsed once by field name,
 * _shape.c), what one (size, chunks) makes of it (the chunks, their phases and the trackers' charges,
 * _derive.c), the cost kernels (_kernels.c) and the runs of many points (_batch.c). */
#ifndef DSE_BATCH_H
#define DSE_BATCH_H

#include "_engine.h"

enum { NO_TRACKER = 0, LOAD_TRACKER = 1, OFFLINE_GREEDY = 2 };
enum { K_PAPER = 1, K_ASTRA = 2, K_ASTRA1 = 3 };
enum { RS = 0, AG = 1, AR = 2, A2A = 3 };
enum { A_RING = 0, A_DIRECT = 1, A_HD = 2 };
enum { D_RING = 0, D_FC = 1, D_SWITCH = 2 };  /* a dim's kind (astra-sim-1) */
#define GIB 1073741824.0
#define MAX_ND 8
/* The integer kernels hold bytes, links and ns below this (dse.sim.compiled.KERNEL_INTS). */
#define KERNEL_INTS (1LL << 61)
/* A point's bandwidths (GB/s) and latencies (ns) lie within dse.core.limits' ranges. */
#define MIN_BW 1e-9
#define MAX_BW 1e9
#define MAX_LAT 1e15
int v_rows(const double *bw, const double *lat, Py_ssize_t n);  /* _shape.c: 0, or -1 (ValueError) */
/* The astra-sim-1 kernel declines a point beyond this many packet-loop steps. */
#define KERNEL_STEPS (1LL << 28)

/* What every point of a shape shares (dse.sim.compiled.Shape.fields gives it by name; _shape.c checks it).
 * `perm`: the orders (norder x nd); `permcode`: an order's id by its code (sum o[i] nd^i; -1: none);
 * `step_*`: per order its steps (dim, kind), [step_off[o], step_off[o+1]); `prefix`: without a tracker,
 * chunk k's order id (nprefix of them). */
typedef struct {
    int nd, norder, tracker, kernel, coll, baseline, policy, slots, shared, dimkey, base, seed_latency,
        serialized, ag_div, fifo_a2a, tied;
    long long npus, endpoint;
    double thr_frac;
    const int *perm, *permcode, *step_off, *step_dim, *step_kind, *prefix, *dim_steps, *dim_p, *dim_algo,
        *dim_switch, *dim_kind;
    const long long *dim_links;
    const double *dim_nic, *dim_router;
    Py_ssize_t nprefix, nstep;
} Shape;

/* What one (size, chunks) makes of a shape (_derive.c). Chunk k has size class chunk_sc[k]; a combo is
 * one distinct phase (dim, kind, bytes in c or cf); plan (order o, size class s) is slot_of[o * nsc + s],
 * its phases the combos plan_combo[plan_off[slot] ..]. Charges (the load tracker): per (order, charge
 * class) slot and per step, the dim, factor and numerator (bandwidth time x bandwidth); thr_num per dim. */
typedef struct {
    long long size, chunks;  /* what it was made for (size -1: nothing yet) */
    int nchunks, nsc, ncombo;
    Py_ssize_t cap_combo, cap_chunk, cap_plan, cap_ch;
    int *chunk_sc, *combo_dim, *combo_kind, *plan_off, *plan_combo, *slot_of, *hash;
    unsigned char *combo_fifo, *combo_tied;
    double *combo_key, *combo_sent, *combo_cf, *ch_num, *ch_fac, thr_num[MAX_ND];
    long long *combo_c, greedy_r, ksteps;
    int *ch_dim, hash_cap;
} Derived;

/* A batch's points (per point: size, chunks, nd bandwidths and latencies) and outputs (per point: time,
 * nd busy ns, nd bytes, its chunk count, and its chunks' order ids from order_off[p]). */
typedef struct {
    Py_ssize_t np;
    const long long *size, *chunks, *order_off;
    const double *bw, *lat;
} Points;
typedef struct { double *time, *busy, *bytes; int *nch, *orders; Py_ssize_t norders; } Outs;

/* Buffers borrowed from Python objects for one call. */
typedef struct { Py_buffer b[48]; int n; } Bufs;
void bufs_release(Bufs *bs);
const void *buf_item(Bufs *bs, PyObject *o, const char *what, const char *fmt, Py_ssize_t want, int writable,
                     Py_ssize_t *len);
int parse_shape(PyObject *fields, Shape *sh, Bufs *bs);  /* _shape.c */
PyObject *shape_field_names(void);
int parse_points(PyObject *t, const Shape *sh, Points *pt, Bufs *bs);
int parse_outputs(PyObject *t, const Shape *sh, const Points *pt, Outs *out, Bufs *bs);

/* _derive.c: make d what (size, chunks) makes of the shape; 0, -1 (no memory), -4 (beyond the
 * kernel's exact integers: the caller runs the point in Python), -5 (more chunks than the prefix). */
int derive(const Shape *sh, Derived *d, long long size, long long chunks);
void derived_free(Derived *d);

/* _kernels.c: the costs of d's combos at one point: busy, delay, tie offsets (t123: all t1, all t2, all
 * t3), per dim the bandwidth OfflineGreedy normalises by (gbw). -4: a time out of the kernel's range. */
int costs(const Shape *sh, const Derived *d, const double *bw, const double *lat, double *busy, double *delay,
          double *t123, double *gbw);
/* _batch.c: n doubles as a Python tuple of floats (NULL: no memory). */
PyObject *float_tuple(const double *x, Py_ssize_t n);

#endif
