/* The parsed shape table (dse.sim.tables), shared by the batch (_batch.c) and its cost kernels (_kernels.c). */
#ifndef DSE_BATCH_H
#define DSE_BATCH_H

#include "_engine.h"

enum { NO_TRACKER = 0, LOAD_TRACKER = 1, OFFLINE_GREEDY = 2 };
enum { K_NONE = 0, K_PAPER = 1, K_ASTRA = 2, K_ASTRA1 = 3 };
enum { RS = 0, AG = 1, AR = 2, A2A = 3 };
enum { A_RING = 0, A_DIRECT = 1, A_HD = 2 };
enum { D_RING = 0, D_FC = 1, D_SWITCH = 2 };  /* a dim's kind (astra-sim-1) */
#define GIB 1073741824.0

typedef struct {
    int nd, nchunks, ncombo, norder, nsc, ncc, nchk, tracker, kernel, policy, slots, shared, dimkey, base,
        seed_latency, highest_first, ag, serialized, endpoint;
    const int *chk_dim, *combo_dim, *combo_tied, *plan_off, *plan_combo, *slot_of, *chunk_sc, *chunk_cc, *fixed, *perm,
        *permcode, *thr_idx, *ch_off, *ch_idx, *ch_dim, *dim_steps, *dim_p, *combo_kind, *dim_algo, *dim_switch;
    const unsigned char *combo_fifo;
    const double *combo_key, *combo_sent, *ch_fac, *chk_num;
    const long long *greedy_r, *combo_c;
    Py_ssize_t nfixed;
    /* astra-sim-1's per-dim constants: kind (D_*), links per NPU, NIC and router latencies (ns) */
    const int *dim_kind; const long long *dim_links; const double *dim_nic, *dim_router;
    long long ksteps;  /* astra-sim-1: the kernel's packet loop steps per point, at most (_validate.c) */
} Table;
/* The astra-sim-1 kernel declines a point beyond this many steps (costs -1: dse.sim.batch costs it in Python). */
#define KERNEL_STEPS (1LL << 28)

/* A batch's points (per point rows; NULL: none given) and outputs. */
typedef struct {
    Py_ssize_t np;
    const double *bw, *lat, *busy, *delay, *ties, *bwt, *gbw;
} Points;
typedef struct { double *time, *busy, *bytes; int *orders; } Outs;

/* Buffers borrowed from Python objects for one call, and the checked parse of the table, points and
 * outputs (_validate.c: every value checked before use). */
typedef struct { Py_buffer b[48]; int n; } Bufs;
void bufs_release(Bufs *bs);
const void *buf(Bufs *bs, PyObject *tup, Py_ssize_t k, const char *fmt, Py_ssize_t want, int writable,
                Py_ssize_t *len);
int parse_table(PyObject *t, Table *tb, Bufs *bs);
int parse_points(PyObject *t, const Table *tb, Points *pt, Bufs *bs);
int parse_outputs(PyObject *t, const Table *tb, const Points *pt, Outs *out, Bufs *bs);

/* One point's costs from the table's kernel (_kernels.c): per combo busy, delay and tie offsets
 * (t123: all t1, then all t2, then all t3), per charge combo the bandwidth time (bwt, if asked) and
 * per dim the bandwidth OfflineGreedy normalises by (gbw). -1: a time out of the kernel's range. */
int costs(const Table *tb, const double *bw, const double *lat, double *busy, double *delay, double *t123,
          double *bwt, double *gbw);

#endif
