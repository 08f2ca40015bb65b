/* A single collective on servers without a global event order (dse/sim/_engine.c keeps one for all
 * else): the same run as the engine's COMPACT loop, to the bit, with fewer events. When it runs and
 * why its numbers are the engine's: docs/model.md §6.6; its Python reference:
 * dse/sim/engine_flow_ref.py.
 *
 * Per dim: one head (its server event while it serves, else its inbox's first arrival), its queue,
 * and its inbox (the arrivals waiting for it: below). The loop takes the least head; an event
 * touches only its own dim and its chunk's next. Set-up: _flow_setup.c. */
#include "_engine.h"
#include "_ranked.h"
#include <limits.h>
#include <math.h>

#define NONE_T INFINITY
#define NONE_K (~0ULL)
#define CMASK ((1 << FLOW_CB) - 1)
#define NEXT (1 << FLOW_CB)  /* an item's next plan position */

int flow_enabled = 1;

/* Does this run go here? Called at the issue of the run's collective (chunks [first, nchunks)): the
 * engine's COMPACT loop would run it (sim_compact), it is the graph's one collective alone (no lag,
 * delay or ideal time, nothing else in flight), and its chunks, plan positions and dims fit. */
int flow_ok(const Sim *s, Py_ssize_t first) {
    const Graph *g = &s->g;
    int alone = first == 0 && g->n == 1 && g->soff[1] == 0 && !g->ideal && g->delays[0] == 0.0 &&
                !g->end_before_release && s->nev == 0 && s->nlive == 0;
    if (!ATOMIC_LOAD(&flow_enabled) || !alone || !sim_compact(s) || s->nchunks > CMASK + 1 || s->nd > 255) return 0;
    for (Py_ssize_t c = 0; c < s->nchunks; c++)  /* plan positions fit an item */
        if (s->clen[c] < 1 || s->cbase[c] + s->clen[c] > 0xffff) return 0;
    return 1;
}

static inline unsigned long long tbits(double t) {  /* ordered as t for t >= +0 and inf */
    unsigned long long u;
    memcpy(&u, &t, sizeof u);
    return u;
}

#ifdef __SIZEOF_INT128__
typedef unsigned __int128 u128;
static inline int earlier(double t1, unsigned long long k1, double t2, unsigned long long k2) {
    return ((u128)tbits(t1) << 64 | k1) < ((u128)tbits(t2) << 64 | k2);
}
#else
static inline int earlier(double t1, unsigned long long k1, double t2, unsigned long long k2) {
    return t1 < t2 || (t1 == t2 && k1 < k2);
}
#endif

/* The state the loop works on, copied out of the Flow (kept in registers). */
typedef struct {
    FDim *dm; FItem *ib; FRec *rec; int *qb; FRing *rg; FLane *ln;
    int nrank, nl, left;
    unsigned long long ctr; double bytes, finish;
} X;

/* An item's phase into dim d's queue (the engine's enqueue_); dse's rule: a ring per rank, the dim's
 * next item kept up to date (the first of a new lowest ring). */
HOT int fl_enqueue(Sim *s, X *x, const FRec *r, int item, int d, QMode qm) {
    if (qm == QM_RANKED_ASTRA) return ra_insert(&s->ra[d], r->rank, item, r->back);
    FDim *D = &x->dm[d];
    x->qb[x->rg[r->q].t++] = item;
    D->mask |= 1ULL << r->rank;
    if (r->rank < D->crank) { D->cand = item; D->crank = r->rank; }
    return 0;
}

/* Dim d's next item off its queue (the engine's q_next). dse's rule: the one kept (known long before:
 * the dim's next start does not wait for the queue), then the next one found. */
HOT int fl_pop(Sim *s, X *x, int d, QMode qm) {
    if (qm == QM_RANKED_ASTRA) return ra_pop(&s->ra[d]);
    FDim *D = &x->dm[d];
    int item = D->cand, k = D->crank;
    FRing *g = &x->rg[d * x->nrank + k];
    g->h++;
    D->mask &= ~((unsigned long long)(g->h == g->t) << k);  /* branch-free: the counts are data */
    if (D->mask) {
        k = low_bit(D->mask);
        D->cand = x->qb[x->rg[d * x->nrank + k].h]; D->crank = k;
    } else {
        D->cand = -1; D->crank = MAX_RANKS;
    }
    return item;
}

/* ----- the inboxes --------------------------------------------------------------------------------
 * A dim's inbox: a run ib[ih, it) sorted by (t, seq) between two sentinels, and a lane per source dim.
 * An arrival goes to its lane if it comes after the lane's last one; else, if the lane is empty, into
 * the run from the back if it passes at most FLOW_WALK later arrivals there (mostly none: arrivals
 * come nearly in time order), else to its lane; else into the run. The inbox's first is the earlier
 * of the run's first and the lanes' (that of lane ml). Without lanes (more than FLOW_LANES dims),
 * every arrival goes into the run. */
static const FItem FRONT = {0.0, 0, 0};  /* before every arrival: (t, seq) > (+0, 0) */
static const FItem BACK = {NONE_T, NONE_K, 0};  /* after every one */

/* An arrival into lane L (after every arrival in it) of dim D, from dim src. */
HOT void fl_lane_put(X *x, FDim *D, FLane *L, int src, double t, unsigned long long k, int item) {
    FItem *e = &x->ib[L->e++];
    e->t = t; e->k = k; e->item = item;
    if (L->e - L->h > 1) return;  /* behind its lane's first */
    L->t = t; L->k = k;
    D->lmask |= 1ULL << src;
    if (D->ml < 0 || earlier(t, k, x->ln[D->ml].t, x->ln[D->ml].k)) D->ml = (int)(L - x->ln);
}

/* An arrival (t, k) from dim src into dim d's inbox; d's head if d is idle and it is the first. */
HOT void fl_put(X *x, int d, int src, double t, unsigned long long k, int item) {
    FDim *D = &x->dm[d];
    FItem *b = x->ib;
    FLane *L = x->ln + (x->nl ? d * x->nl + src : 0);  /* its lane, when there are lanes */
    int queued = (int)(D->lmask >> src & 1), j = D->it, stop = x->nl && !queued ? j - FLOW_WALK : -1;
    if (queued && !earlier(t, k, b[L->e - 1].t, b[L->e - 1].k)) {
        fl_lane_put(x, D, L, src, t, k, item);
    } else {
        while (earlier(t, k, b[j - 1].t, b[j - 1].k) && j != stop) {  /* FRONT stops it */
            b[j] = b[j - 1];
            j--;
        }
        if (j == stop && earlier(t, k, b[j - 1].t, b[j - 1].k)) {  /* too far: undone, into its lane */
            memmove(b + j, b + j + 1, FLOW_WALK * sizeof(FItem));
            b[D->it] = BACK;
            fl_lane_put(x, D, L, src, t, k, item);
        } else {
            b[j].t = t; b[j].k = k; b[j].item = item;
            b[++D->it] = BACK;
        }
    }
    if (D->item < 0 && earlier(t, k, D->t, D->k)) { D->t = t; D->k = k; }
}

/* The lanes' first arrival off (lane ml's): its item; the lane with the lanes' next first (among the
 * non-empty ones: mostly none or one). */
HOT int fl_lane_take(X *x, FDim *D) {
    FLane *L = &x->ln[D->ml], *g = x->ln + (D->ml - D->ml % x->nl);
    int item = x->ib[L->h++].item, best = -1;
    if (L->h < L->e) { L->t = x->ib[L->h].t; L->k = x->ib[L->h].k; }
    else D->lmask &= ~(1ULL << (L - g));
    unsigned long long m = D->lmask;
    if (m && !(m & (m - 1))) best = low_bit(m);
    else if (m) {
        double bt = NONE_T;
        unsigned long long bk = NONE_K;
        for (; m; m &= m - 1) {
            int j = low_bit(m);
            if (earlier(g[j].t, g[j].k, bt, bk)) { best = j; bt = g[j].t; bk = g[j].k; }
        }
    }
    D->ml = best < 0 ? -1 : (int)(g - x->ln) + best;
    return item;
}

/* The inbox's first arrival: the run's first, or lane ml's if that is earlier. */
static inline FItem *fl_first(const X *x, const FDim *D, int *lane) {
    FItem *a = &x->ib[D->ih];
    *lane = D->ml >= 0 && earlier(x->ln[D->ml].t, x->ln[D->ml].k, a->t, a->k);
    return *lane ? &x->ib[x->ln[D->ml].h] : a;
}

/* The inbox's first arrival off (a, from fl_first): its item. */
HOT int fl_take(X *x, FDim *D, FItem *a, int lane) {
    if (lane) return fl_lane_take(x, D);
    int item = a->item;
    *a = FRONT;  /* the run's front sentinel now */
    D->ih++;
    return item;
}

/* The arrivals at dim d before event (t, k) enter its queue, in their order. */
HOT int fl_flush(Sim *s, X *x, int d, double t, unsigned long long k, QMode qm) {
    FDim *D = &x->dm[d];
    for (;;) {
        int lane;
        FItem *a = fl_first(x, D, &lane);
        if (!earlier(a->t, a->k, t, k)) return 0;
        int item = fl_take(x, D, a, lane);
        if (fl_enqueue(s, x, &x->rec[item >> FLOW_CB], item, d, qm)) return -1;
    }
}

static inline void chunk_done(Sim *s, X *x, int item, double t) {
    s->chunk_end[item & CMASK] = t;
    if (t > x->finish) x->finish = t;
    x->left--;
}

/* Dim d starts an item's phase at t (the engine's start_phase): its server event (a RELEASE, class
 * 1 in its key, when the phase has a delay), and its arrival into the next dim's inbox (or the
 * chunk's end). */
HOT void fl_start(Sim *s, X *x, int d, int item, double t) {
    const FRec *r = &x->rec[item >> FLOW_CB];
    FDim *D = &x->dm[d];
    D->busy += r->busy;
    D->sent += r->sent;
    x->bytes += r->sent;
    double end = t + r->busy;
    D->item = item;
    D->t = end;
    if (r->delay != 0.0 && end + r->delay != end) {  /* a delay lost to rounding is none */
        D->k = (1ULL << 58) | x->ctr;
        double ta = end + r->delay;
        unsigned long long ka = x->ctr + 1;
        x->ctr += 2;
        if (!r->last) fl_put(x, r[1].dim, r->dim, ta, ka, item + NEXT);
        else chunk_done(s, x, item, ta);
        return;
    }
    D->k = x->ctr++;
}

/* Dim d, free at t, takes its next waiting phase, or idles until its inbox's first arrival. */
HOT int fl_refill(Sim *s, X *x, int d, double t, QMode qm) {
    if (qm == QM_RANKED_ASTRA ? s->ra[d].mask != 0 : x->dm[d].mask != 0) {
        int item = fl_pop(s, x, d, qm);
        if (item < 0) return -1;
        fl_start(s, x, d, item, t);
        return 0;
    }
    FDim *D = &x->dm[d];
    int lane;
    const FItem *a = fl_first(x, D, &lane);
    D->item = -1; D->t = a->t; D->k = a->k;
    return 0;
}

/* The least head: its dim, or -1 when every head is empty. Branches, not selects: the next dim is
 * mostly guessed right, and a select would make every event wait for the last one's head. */
HOT int fl_next(const X *x, int nd) {
    int best = -1;
    const FDim *h = x->dm;
#ifdef __SIZEOF_INT128__
    u128 b = (u128)tbits(NONE_T) << 64 | NONE_K;
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 8
#endif
    for (int d = 0; d < nd; d++) {
        u128 v = (u128)tbits(h[d].t) << 64 | h[d].k;
        if (v < b) { b = v; best = d; }
    }
#else
    double bt = NONE_T;
    unsigned long long bk = NONE_K;
    for (int d = 0; d < nd; d++)
        if (earlier(h[d].t, h[d].k, bt, bk)) { bt = h[d].t; bk = h[d].k; best = d; }
#endif
    return best;
}

static void x_load(X *x, const Flow *f) {
    x->dm = f->dm; x->ib = f->ib; x->rec = f->rec; x->qb = f->qb; x->rg = f->rg; x->ln = f->ln; x->nl = f->nl;
    x->nrank = f->nrank; x->left = f->left; x->ctr = f->ctr; x->bytes = f->bytes; x->finish = f->finish;
}

static void x_store(const X *x, Flow *f) {
    f->left = x->left; f->ctr = x->ctr; f->bytes = x->bytes; f->finish = x->finish;
}

/* The loop; `ndc`: the dims, a constant in the specialised loops (0: s->nd). */
HOT int fl_loop(Sim *s, QMode qm, int ndc) {
    X xs, *x = &xs;
    x_load(x, &s->fl);
    int nd = ndc ? ndc : s->nd, b, rc = 0;
    while ((b = fl_next(x, nd)) >= 0) {
        FDim *D = &x->dm[b];
        double t = D->t;
        unsigned long long k = D->k;
        int item = D->item;
        if (item < 0) {  /* idle: its first arrival starts it (its queue is empty) */
            int lane;
            FItem *a = fl_first(x, D, &lane);
            fl_start(s, x, b, fl_take(x, D, a, lane), t);
            continue;
        }
        if ((rc = fl_flush(s, x, b, t, k, qm))) break;
        int d2 = -1;
        if (!(k >> 58)) {  /* a COMPLETE: the chunk moves on now */
            const FRec *r = &x->rec[item >> FLOW_CB];
            if (!r->last) {
                d2 = r[1].dim;
                item += NEXT;
                if (d2 != b && (rc = fl_flush(s, x, d2, t, k, qm))) break;
                if ((d2 == b || x->dm[d2].item >= 0) && (rc = fl_enqueue(s, x, r + 1, item, d2, qm))) break;
            } else chunk_done(s, x, item, t);
        }
        if ((rc = fl_refill(s, x, b, t, qm))) break;
        if (d2 >= 0 && d2 != b && x->dm[d2].item < 0) fl_start(s, x, d2, item, t);  /* it was idle: it starts there */
    }
    x_store(x, &s->fl);
    return rc;
}

static int fl_loop_dse(Sim *s) { return fl_loop(s, QM_RANKED_DSE, 0); }
static int fl_loop_astra(Sim *s) { return fl_loop(s, QM_RANKED_ASTRA, 0); }
static int fl_loop_dse4(Sim *s) { return fl_loop(s, QM_RANKED_DSE, 4); }
static int fl_loop_astra4(Sim *s) { return fl_loop(s, QM_RANKED_ASTRA, 4); }

/* ----- issue and run ---------------------------------------------------------------------------- */
/* The collective's chunks [0, nchunks) enter their first queues at t, in chunk order (issue). */
int flow_issue(Sim *s, double t) {
    Flow *f = &s->fl;
    if (flow_setup(s)) return -1;
    X xs;
    x_load(&xs, f);
    for (int c = 0; c < (int)s->nchunks; c++) {
        Py_ssize_t j0 = s->cbase[c];
        const FRec *r = &f->rec[j0];
        int item = (int)(j0 << FLOW_CB) | c, d = r->dim;
        if (f->dm[d].item < 0) fl_start(s, &xs, d, item, t);
        else if (fl_enqueue(s, &xs, r, item, d, s->qmode)) return -1;
    }
    x_store(&xs, f);
    return 0;
}

/* The run after flow_issue, in the loop s->loop (LOOP_FLOW_*); then the collective ends with its last
 * chunk. 0, -1 (out of memory), -2 (chunks left: cannot happen). */
int flow_run(Sim *s) {
    Flow *f = &s->fl;
    int rc;
    switch (s->loop) {
    case LOOP_FLOW_DSE_4D: rc = fl_loop_dse4(s); break;
    case LOOP_FLOW_ASTRA_4D: rc = fl_loop_astra4(s); break;
    case LOOP_FLOW_DSE: rc = fl_loop_dse(s); break;
    default: rc = fl_loop_astra(s);
    }
    if (rc) return -1;
    if (f->left) return -2;
    for (int d = 0; d < s->nd; d++) { s->busy[d] = f->dm[d].busy; s->sent[d] = f->dm[d].sent; }
    s->bytes_sent = f->bytes; s->finish = f->finish;
    int o = s->owner[0];
    s->remaining[o] = 0;
    return network_end(s, o, s->finish) || dispatch(s, s->finish) ? -1 : 0;
}
