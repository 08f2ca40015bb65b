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

/* Relaxed atomics for counters that runs without the GIL update (the batch's threads). */
#if defined(__GNUC__) || defined(__clang__)
#define ATOMIC_ADD(p, v) ((void)__atomic_fetch_add((p), (v), __ATOMIC_RELAXED))
#define ATOMIC_LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define ATOMIC_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#else
#define ATOMIC_ADD(p, v) ((void)(*(p) += (v)))
#define ATOMIC_LOAD(p) (*(p))
#define ATOMIC_STORE(p, v) ((void)(*(p) = (v)))
#endif

enum { FIFO = 0, SCF_PRIORITY = 1, SCF_ASTRA = 2, FIXED_SEQ = 3 };
/* How a Sim's dims keep their waiting phases (Sim.qmode; sim_init picks it from the policy). */
typedef enum {
    QM_DEQUE = 0,         /* a deque per dim: FIFO, and either smallest-first rule with issue priorities */
    QM_BUCKETS = 1,       /* dse's smallest-first rule: buckets by key (_queues.c) */
    QM_ASTRA = 2,         /* ASTRA-sim's smallest-first rule: its list with runs of records (_queues.c) */
    QM_RANKED_DSE = 3,    /* QM_BUCKETS by key rank, every rank known up front (sim_rank_keys, _ranked.h) */
    QM_RANKED_ASTRA = 4,  /* QM_ASTRA by key rank, the same way */
    QM_FIXED = 5          /* a fixed service order (FIXED_SEQ, _queues.c) */
} QMode;
/* The event loops (sim_go picks one, Sim.loop says which ran; LOOP_NAMES are their names in Python):
 * the general one; the specialised COMPACT and TIED ones (_engine.c: one phase per dim at a time,
 * ranked queues, no lead, log or priorities; compact events, or events with tie keys); _flow.c's
 * loop for a single collective (any dims, or 4 as a constant). */
typedef enum {
    LOOP_GENERIC, LOOP_COMPACT_DSE, LOOP_COMPACT_ASTRA, LOOP_TIED_DSE, LOOP_TIED_ASTRA,
    LOOP_FLOW_DSE, LOOP_FLOW_ASTRA, LOOP_FLOW_DSE_4D, LOOP_FLOW_ASTRA_4D, LOOP_COUNT
} Loop;
extern const char *const LOOP_NAMES[LOOP_COUNT];
/* sim_go's runs of each loop since the module loaded (atomic: the batch runs without the GIL) */
extern long long loop_runs[LOOP_COUNT];
/* 0: sim_go never picks _flow.c's loop (the tests' and benchmarks' switch, _engine.set_flow) */
extern int flow_enabled;
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

/* Ev's order: (t, cls, a1, a2, a3, st, dk, seq). */
static inline int ev_less(const Ev *x, const Ev *y) {
    if (x->t != y->t) return x->t < y->t;
    if (x->cls != y->cls) return x->cls < y->cls;
    if (x->a1 != y->a1) return x->a1 < y->a1;
    if (x->a2 != y->a2) return x->a2 < y->a2;
    if (x->a3 != y->a3) return x->a3 < y->a3;
    if (x->st != y->st) return x->st < y->st;
    if (x->dk != y->dk) return x->dk < y->dk;
    return x->seq < y->seq;
}

/* The same, when no phase has tie keys and same-tick ends are not ordered by dim (`notie`): ordered
 * by (t, key = cls << 58 | seq) alone, 32 bytes. */
typedef struct { double t; unsigned long long key; int kind, a, b; } Ev2;
/* Arrivals after one latency on one dim come in time order: each such lane keeps them first-in-
 * first-out and only its head in the heap (latency-bound phases put hundreds in flight). */
typedef struct { int dim; double delay; Ev2 *buf; int head, len, cap; } Lane;

typedef struct { int c, step; double start, end; } LogRec;

/* A single collective without a global event order (_flow.c, set up by _flow_setup.c). Per dim (FDim):
 * its head (its server event, or when idle its inbox's first arrival), its busy and sent sums, the
 * mask of its non-empty smallest-first rings (dse's rule) and the first item of the lowest (cand, of
 * rank crank: -1 and MAX_RANKS if none), the item it serves (-1: idle), and its inbox (_flow.c): the
 * arrivals waiting for it, in a sorted run ib[ih, it) and in its lanes ln[d nl, d nl + nl), one per
 * source dim (lmask: the non-empty ones; ml: the lane of the lanes' first, -1 if none). A lane:
 * ib[h, e) in (t, seq) order, (t, k) its first's (inf: none). Per plan position: the run's record of
 * its phase. dse's queues: a ring per (dim, rank), qb[h, t) (rg). Each run, lane and ring has its own
 * part of ib or qb, as large as the run can fill it. An item is a chunk and its plan position
 * (FLOW_CB bits for the chunk). */
#define FLOW_CB 15
#define FLOW_LANES 64  /* lanes (dims) into one dim at most (a bit each in FDim.lmask); more dims: none */
#define FLOW_WALK 8    /* an arrival passes at most this many in a dim's sorted run, if it has a lane */
typedef struct { double t; unsigned long long k; int item; } FItem;
typedef struct {
    double t; unsigned long long k; double busy, sent; unsigned long long mask, lmask;
    int item, cand, crank, ih, it, ml;
} FDim;
typedef struct { int h, t; } FRing;
typedef struct { double t; unsigned long long k; int h, e; } FLane;
typedef struct { double busy, delay, sent; unsigned short q; unsigned char dim, rank, back, last; } FRec;
typedef struct {
    FDim *dm; FItem *ib; int *qb; FRing *rg; FRec *rec; FLane *ln; int *stamp, *mult, *plan;
    Py_ssize_t nib, nqb, nrec, nlncap; int ndm, nrg, nplan, nl, nd, nrank, on, left, run;
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
    QMode qmode;
    Loop loop;  /* the loop sim_go ran */
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
    Ev *theads;  /* the TIED loop's: each dim's server event (kind -1: none), counted in nlive */
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

/* shared by the engine's parts (_engine.c: network and loops; _events.c: events; _graph.c: nodes, set-up;
 * _heaps.c: containers) */
int grow(void **p, Py_ssize_t *cap, Py_ssize_t need, size_t size);
int ev_push(Sim *s, double t, int cls, int kind, int a, int b, const double *tie, int dk);
int kh_push(KHeap *hp, KItem it);
KItem kh_pop(KHeap *hp);
void ev_pop(Sim *s, Ev *out);
void ev2_pop(Sim *s, Ev *out);
int ev2_push(Sim *s, double t, int cls, int kind, int a, int b);
int heads_room(Sim *s, int n);
int lane_of(Sim *s, int d, double delay);  /* the lane of arrivals `delay` after dim d: -1 no memory, -2 none */
int lane_room(Lane *L);
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

/* Would the engine's COMPACT loop run this (one place per dim, compact events, ranked queues, no lead,
 * log, priorities or tie by dim)? Once the run's roots are issued (sim_go), or at an issue. */
int sim_compact(const Sim *s);
/* a single collective without a global event order (_flow.c) */
int flow_ok(const Sim *s, Py_ssize_t first);
int flow_setup(Sim *s);  /* _flow_setup.c: a run's records and parts; 0 or -1 */
int flow_issue(Sim *s, double t);
int flow_run(Sim *s);
void flow_free(Flow *f);

/* the fixed service order (_queues.c) */
int fq_ready(const Sim *s, int d);
int fq_take(Sim *s, int d);
int fq_stalled(Sim *s);

/* Python's objects into the engine's arrays (_convert.c): 0 or -1 with an exception set. Plans by identity
 * (IdTable: chunks sharing a tuple share its phases; it holds a reference to each); a graph's and a
 * service order's arrays (GraphBuf, OrderBuf: the caller frees them). */
typedef struct { PyObject **key; int *val; Py_ssize_t cap, n; } IdTable;
typedef struct { int *kinds, *res, *sdst; double *dur, *delays, *slag, *ideal; Py_ssize_t *soff; } GraphBuf;
typedef struct { int *seq; Py_ssize_t *off; } OrderBuf;
PyObject *seq_tuple(PyObject *o, const char *what);  /* o's items as a tuple held while read; NULL: error */
int plan_id(Sim *s, IdTable *tb, PyObject *plan);     /* the plan's id, its phases added if new; -1 */
void id_free(IdTable *tb);
void phases_free(Phases *f);
int graph_from(PyObject *t, Graph *g, GraphBuf *b);
void gb_free(GraphBuf *b);
int order_from(PyObject *order, int nd, OrderBuf *b);

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
/* Each phase's key rank among its dim's distinct keys into rank: 1 if no dim has more than MAX_RANKS
 * (else 0, the ranks unset), -1 (no memory). */
int rank_phases(const int *dim, const double *key, Py_ssize_t n, int nd, int *rank);
/* A Sim serving ranked queues whose phases were re-pointed since (the batch's next size): their ranks
 * anew. 0, 1 (a dim has more than MAX_RANKS: make a new Sim) or -1 (no memory). */
int sim_rerank(Sim *s);
int sim_add_chunks(Sim *s, const int *ids, int n, int owner, long long prio);
void graph_single(Graph *g);

#endif
