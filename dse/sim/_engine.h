/* The engine's state (dse/sim/_engine.c), shared by its Python entry (_engine_mod.c) and the batch (_batch.c). */
#ifndef DSE_ENGINE_H
#define DSE_ENGINE_H

#include <Python.h>
#include <stdlib.h>
#include <string.h>

/* A step the compiler must inline: the engine's specialised loop runs it with constants. */
#if defined(__GNUC__) || defined(__clang__)
#define HOT static inline __attribute__((always_inline))
#else
#define HOT static inline
#endif

enum { FIFO = 0, SCF_PRIORITY = 1, SCF_ASTRA = 2, FIXED_SEQ = 3 };
enum { COMPLETE = 0, RELEASE = 1, ARRIVE = 2, COMM_DONE = 3, COMPUTE_DONE = 4, LAG = 5, SHARE_DONE = 6 };
enum { N_COMPUTE = 0, N_COMM = 1, N_MARK = 2, N_REPLAY = 3 };
enum { GPU = 0, CPU = 1, NET = 2 };

typedef struct { double key; long long seq; int item; } KItem;
typedef struct { KItem *h; Py_ssize_t n, cap; } KHeap;
typedef struct { KItem *buf; Py_ssize_t head, len, cap; } Deque;

/* The smallest-first queues (_queues.c): rings of ints, buckets by key, ASTRA-sim's list with runs. */
typedef struct { int *buf; int head, len, cap; } Ring;
typedef struct { double key; Ring r; } KRing;
typedef struct { KRing *b; int n, cap, last, first; long long count; } Buckets;
typedef struct { double key; int item, prev, next; } QNode;
typedef struct { QNode *nodes; int nn, capn, freelist, head, tail; KRing *runs; int nr, capr; long long count; } Astra;
int bq_push(Buckets *q, double key, int item);
int bq_pop(Buckets *q);
void bq_clear(Buckets *q);
void bq_free(Buckets *q);
int aq_insert(Astra *q, double key, int item, int back);
int aq_pop(Astra *q);
void aq_clear(Astra *q);
void aq_free(Astra *q);
/* The same two rules when every key's rank among its dim's distinct keys is known up front (at most
 * 64: the batch's tables): a ring per rank and a bitmask of the non-empty ones, O(1) per operation. */
#define MAX_RANKS 64
#define MAX_HEADS 64  /* event sources beside the heap (_engine.c) */
typedef struct { Ring *r; unsigned long long mask; long long count; } RBuckets;
typedef struct { int rank, item, prev, next; } RNode;
typedef struct {
    RNode *nodes; int nn, capn, freelist, head, tail; Ring *runs; unsigned long long mask; long long count;
    int *tmp; int tmpcap;
} RAstra;
#if defined(__GNUC__) || defined(__clang__)
static inline int low_bit(unsigned long long m) { return __builtin_ctzll(m); }
static inline int high_bit(unsigned long long m) { return 63 - __builtin_clzll(m); }
#else
static inline int low_bit(unsigned long long m) { int k = 0; while (!(m >> k & 1)) k++; return k; }
static inline int high_bit(unsigned long long m) { int k = 63; while (!(m >> k & 1)) k--; return k; }
#endif
/* Take list q's front node f off (nodes nd): relink its successor, put f on the free list, and set
 * `item` to its item. Both ASTRA-sim lists (QNode, RNode) have these fields. */
#define LIST_TAKE_FRONT(q, nd, f, item)                                    \
    do {                                                                   \
        (q)->head = (nd)[f].next;                                          \
        if ((q)->head >= 0) (nd)[(q)->head].prev = -1; else (q)->tail = -1; \
        (item) = (nd)[f].item;                                             \
        (nd)[f].prev = (q)->freelist;                                      \
        (q)->freelist = (f);                                               \
        (q)->count--;                                                      \
    } while (0)
int ring_grow(Ring *r);
int rnode_grow(RAstra *q);
void rq_clear(RBuckets *b, RAstra *a);
void rq_free(RBuckets *b, RAstra *a);

/* One event: ordered by (t, cls, a1, a2, a3, st, dk, seq); kind, a, b say what it is (64 bytes). */
typedef struct {
    double t, a1, a2, a3, st; long long seq; short cls, dk; int kind; int a, b;
} Ev;

/* The same, when no phase has tie keys and same-tick ends are not ordered by dim (`notie`): ordered
 * by (t, key = cls << 58 | seq) alone, 32 bytes. */
typedef struct { double t; unsigned long long key; int kind, a, b; } Ev2;
/* Arrivals after one latency on one dim come in time order: each such lane keeps them first-in-
 * first-out and only its head in the heap (latency-bound phases put hundreds in flight). */
typedef struct { int dim; double delay; Ev2 *buf; int head, len, cap; } Lane;

typedef struct { int c, step; double start, end; } LogRec;

/* A single collective without a global event order (_flow.c). Per dim (FDim): its head (its server
 * event, or when idle its inbox's first arrival), its busy and sent sums, the mask of its non-empty
 * smallest-first rings (dse's rule) and the first item of the lowest (cand, of rank crank: -1 and
 * MAX_RANKS if none), the item it serves (-1: idle) and its inbox: the arrivals in
 * ib[ih, it) sorted by (t, seq), between two sentinels. Per plan position: the run's record of its
 * phase (what the Sim's phases fix about it made once: ci, its phase, -1 until then). dse's queues: a ring per (dim, rank), qb[h, t) (rg). Each inbox and ring has its own part
 * of ib or qb, as large as the run can fill it. An item is a chunk and its plan position (FLOW_CB
 * bits for the chunk). */
#define FLOW_CB 15
typedef struct { double t; unsigned long long k; int item; } FItem;
typedef struct {
    double t; unsigned long long k; double busy, sent; unsigned long long mask; int item, ih, it, cand, crank, pad;
} FDim;
typedef struct { int h, t; } FRing;
typedef struct { double busy, delay, sent; unsigned short q; unsigned char dim, rank, back, last; } FRec;
typedef struct {
    FDim *dm; FItem *ib; int *qb; FRing *rg; FRec *rec; int *ci, *stamp, *mult, *plan;
    Py_ssize_t nib, nqb, nrec; int ndm, nrg, nplan, nd, nrank, on, left, run;
    unsigned long long ctr; double bytes, finish;
} Flow;

/* Flat phases: plan p's phases are [poff[p], poff[p+1]). */
typedef struct {
    int *dim; double *busy, *delay, *key, *sent, *t1, *t2, *t3; unsigned char *fifo, *hastie;
    const int *rank;  /* each phase's key rank on its dim (NULL: not known up front) */
    long long *lstride; int *lp, *loff; int *lpool;
    Py_ssize_t len, cap, npool, poolcap;
} Phases;

typedef struct {
    int n;
    const int *kinds, *res; const double *dur, *delays;
    const Py_ssize_t *soff; const int *sdst; const double *slag;
    int end, comm_exclusive, by_id, end_before_release;
    double min_ns;
    const double *ideal;
} Graph;

typedef struct Sim Sim;
struct Sim {
    int nd, policy, slots, shared, dimkey, use_prio, track, record;
    int qmode;  /* 0 deque, 1 buckets, 2 ASTRA-sim's list, 3 and 4 the same two ranked (sim_use_ranks),
                 * 5 a fixed service order (FIXED_SEQ: _queues.c) */
    Phases ph;
    Py_ssize_t *poff; Py_ssize_t nplans, poffcap;
    const int *pmap;  /* plan position -> phase index (the batch's combos); NULL: the identity */
    Graph g;
    /* chunks */
    Py_ssize_t *cbase; int *clen, *pos, *owner;  /* cbase, clen: where the chunk's plan starts, its length */
    long long *prio; double *started, *chunk_end; long long *phase_lead;
    Py_ssize_t nchunks, chcap;
    /* dimensions */
    /* a fixed service order: dim d serves fseq[foff[d] .. foff[d + 1]), its next entry fnext[d]; per
     * chunk, the dim where its phase waits (fat, -1: none); stall: (dim, entry, chunk) of a stall */
    const int *fseq; const Py_ssize_t *foff; Py_ssize_t *fnext; int *fat; Py_ssize_t stall[3];
    Deque *wait; Buckets *bq; Astra *aq; RBuckets *rb; RAstra *ra; int *ownrank; KHeap *active; int *running; double *busy, *sent, *vtime, *vlast; int *gen;
    /* nodes */
    int *need; double *start, *end, *comm_rel, *other_rel; unsigned char *by_comm; int *remaining;
    long long *node_lead; int *scratch_roots; int nroots;
    KHeap ready[3]; int taken[3];
    /* events */
    Ev *ev; Ev2 *ev2; Py_ssize_t nev, evcap; long long counter; int notie;
    Lane *lanes; int nlanes, lanecap, *lastlane;
    Ev2 *heads; int headcap, nlive, srv;  /* event sources beside the heap (_engine.c) */
    long long *lagseq, *laglead; Py_ssize_t nlag, lagcap;  /* a LAG event's lead, by its seq */
    Flow fl;  /* this run is _flow.c's (fl.on) */
    long long lead; int in_flight;
    double comm_since, comm_ns, compute_ns, cpu_ns, bytes_sent, finish;
    LogRec *logv; Py_ssize_t nlog, logcap;
    int *scratch; Py_ssize_t nscratch, scratchcap;
    /* the caller's: issue adds collective i's chunks (add_chunks), resumed is told of a resume */
    int (*issue_cb)(Sim *, int, double);
    int (*resumed_cb)(Sim *);
    void *ctx;
};

/* shared by the engine's parts (_engine.c: events and network; _graph.c: nodes, set-up; _heaps.c: containers) */
int grow(void **p, Py_ssize_t *cap, Py_ssize_t need, size_t size);
int ev_push(Sim *s, double t, int cls, int kind, int a, int b, const double *tie, int dk);
int kh_push(KHeap *hp, KItem it);
KItem kh_pop(KHeap *hp);
void ev_pop(Sim *s, Ev *out);
int q_insert(Deque *q, Py_ssize_t j, KItem w);
static inline int kh_less(const KItem *x, const KItem *y) {
    if (x->key != y->key) return x->key < y->key;
    return x->seq < y->seq;
}
static inline KItem *q_at(Deque *q, Py_ssize_t j) { return &q->buf[q->head + j]; }
static inline KItem q_pop_front(Deque *q) {
    KItem w = q->buf[q->head];
    q->head += 1;
    q->len -= 1;
    return w;
}
int enqueue(Sim *s, int c);
int refill(Sim *s, int d, double t);
int issue(Sim *s, int i, double t);
int arrive(Sim *s, int src, int x, double t);
int release_node(Sim *s, int x, double t);
int network_end(Sim *s, int i, double t);
int dispatch(Sim *s, double t);

/* a single collective without a global event order (_flow.c) */
int flow_ok(const Sim *s, Py_ssize_t first);
int flow_issue(Sim *s, double t);
int flow_run(Sim *s);
void flow_free(Flow *f);

/* the fixed service order (_queues.c) */
int fq_ready(const Sim *s, int d);
int fq_take(Sim *s, int d);
int fq_stalled(Sim *s);

/* checks of what Python gives (_validate.c): 0, or -1 with a ValueError or TypeError naming `what` */
int v_long(PyObject *o, long long lo, long long hi, const char *what, long long *out);
int v_ints(const int *v, Py_ssize_t n, long long lo, long long hi, const char *what);
int v_longs(const long long *v, Py_ssize_t n, long long lo, long long hi, const char *what);
int v_doubles(const double *v, Py_ssize_t n, double lo, int positive, const char *what);
int v_offsets(const int *off, Py_ssize_t n, Py_ssize_t total, int strict, const char *what);
int v_mul(Py_ssize_t a, Py_ssize_t b, Py_ssize_t cap, Py_ssize_t *out, const char *what);

int sim_init(Sim *s, int nd, int policy, int slots, int shared, int dimkey, int use_prio, int track, int record,
             int nnodes);
void sim_reset(Sim *s);
void sim_free(Sim *s);
int sim_go(Sim *s);
int sim_rank_keys(Sim *s);
int sim_add_chunks(Sim *s, const int *ids, int n, int owner, long long prio);
void graph_single(Graph *g);

#endif
