/* A single collective on servers without a global event order (dse/sim/_engine.c keeps one for all
 * else): the same run as the engine's COMPACT loop, to the bit, with fewer events.
 *
 * When: one collective alone (a one-node graph, no lag, no delay, no ideal time), one phase per dim at
 * a time, compact events (no tie keys), ranked smallest-first queues (dse's or ASTRA-sim's), no
 * priorities, lead or log (flow_ok). Then the engine's events are each dim's server event (its
 * phase's COMPLETE or RELEASE: (t, cls, seq)) and the ARRIVEs of phases with a delay (t, 0, seq),
 * seqs in the order the events are made; an event touches only its own dim and its chunk's next.
 *
 * Why the global order is not needed for the arrivals: an ARRIVE at a busy dim only puts its chunk
 * in that dim's queue (its refill does nothing), so it may wait in the dim's inbox (sorted by
 * (t, seq)) until the dim next reads its queue: at its own server event, or at a COMPLETE whose
 * chunk moves on to it; there the inbox's events earlier than that event enter the queue first, in
 * their order. What is left is one event per dim: its server event if busy, else its inbox's first
 * arrival (which starts it). The loop takes the least of those nd heads, as the engine would: the
 * same steps on each dim and its queue in the same order, the same events made in the same order
 * (a queue's entry makes none), so the same seqs compared and the same sums. */
#include "_engine.h"
#include "_ranked.h"
#include <math.h>

#define NONE_T INFINITY
#define NONE_K (~0ULL)
#define CMASK ((1 << FLOW_CB) - 1)
#define NEXT (1 << FLOW_CB)  /* an item's next plan position */

/* Can this run go here (the file's comment)? Called at the issue of the run's one collective. */
int flow_ok(const Sim *s, Py_ssize_t first) {
    const Graph *g = &s->g;
    if (!(first == 0 && g->n == 1 && g->soff[1] == 0 && !g->ideal && g->delays[0] == 0.0 &&
          !g->end_before_release && s->slots == 1 && !s->shared && s->notie && !s->dimkey && !s->track &&
          !s->record && !s->use_prio && (s->qmode == 3 || s->qmode == 4) && s->nev == 0 && s->nlive == 0 &&
          s->nchunks <= CMASK + 1))
        return 0;
    if (s->nd > 255) return 0;
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
    FDim *dm; FItem *ib; FRec *rec; int *qb; FRing *rg;
    int nrank, left;
    unsigned long long ctr; double bytes, finish;
} X;

static const FItem FRONT = {0.0, 0, 0};  /* before every arrival: (t, seq) > (+0, 0) */
static const FItem BACK = {NONE_T, NONE_K, 0};  /* after every one */

/* An item's phase into dim d's queue (the engine's enqueue_); qm 3: dse's rule, a ring per rank,
 * the dim's next item kept up to date (the first of a new lowest ring). */
HOT int fl_enqueue(Sim *s, X *x, const FRec *r, int item, int d, int qm) {
    if (qm == 4) return ra_insert(&s->ra[d], r->rank, item, r->back);
    FDim *D = &x->dm[d];
    x->qb[x->rg[r->q].t++] = item;
    D->mask |= 1ULL << r->rank;
    if (r->rank < D->crank) { D->cand = item; D->crank = r->rank; }
    return 0;
}

/* Dim d's next item off its queue (the engine's q_next). qm 3: the one kept (known long before:
 * the dim's next start does not wait for the queue), then the next one found. */
HOT int fl_pop(Sim *s, X *x, int d, int qm) {
    if (qm == 4) return ra_pop(&s->ra[d]);
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

/* An arrival (t, k) at dim d, into d's inbox in (t, k) order (the front sentinel stops the search);
 * the head of an idle d. */
HOT void fl_put(X *x, int d, double t, unsigned long long k, int item) {
    FItem *b = x->ib;
    FDim *D = &x->dm[d];
    int j = D->it;
    while (earlier(t, k, b[j - 1].t, b[j - 1].k)) {
        b[j] = b[j - 1];
        j--;
    }
    b[j].t = t; b[j].k = k; b[j].item = item;
    b[++D->it] = BACK;
    if (D->item < 0 && j == D->ih) { D->t = t; D->k = k; }
}

/* The arrivals at dim d before event (t, k) enter its queue, in their order (the back sentinel
 * stops the loop). */
HOT int fl_flush(Sim *s, X *x, int d, double t, unsigned long long k, int qm) {
    FItem *b = x->ib;
    FDim *D = &x->dm[d];
    int h = D->ih;
    while (earlier(b[h].t, b[h].k, t, k)) {
        int item = b[h].item;
        b[h] = FRONT;
        D->ih = ++h;
        if (fl_enqueue(s, x, &x->rec[item >> FLOW_CB], item, d, qm)) return -1;
    }
    return 0;
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
        if (!r->last) fl_put(x, r[1].dim, ta, ka, item + NEXT);
        else chunk_done(s, x, item, ta);
        return;
    }
    D->k = x->ctr++;
}

/* Dim d, free at t, takes its next waiting phase, or idles until its inbox's first arrival. */
HOT int fl_refill(Sim *s, X *x, int d, double t, int qm) {
    if (qm == 4 ? s->ra[d].mask != 0 : x->dm[d].mask != 0) {
        int item = fl_pop(s, x, d, qm);
        if (item < 0) return -1;
        fl_start(s, x, d, item, t);
        return 0;
    }
    FDim *D = &x->dm[d];
    const FItem *e = &x->ib[D->ih];  /* the back sentinel if none */
    D->item = -1; D->t = e->t; D->k = e->k;
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
    x->dm = f->dm; x->ib = f->ib; x->rec = f->rec; x->qb = f->qb; x->rg = f->rg;
    x->nrank = f->nrank; x->left = f->left; x->ctr = f->ctr; x->bytes = f->bytes; x->finish = f->finish;
}

static void x_store(const X *x, Flow *f) {
    f->left = x->left; f->ctr = x->ctr; f->bytes = x->bytes; f->finish = x->finish;
}

/* The loop; `ndc`: the dims, a constant in the specialised loops (0: s->nd). */
HOT int fl_loop(Sim *s, int qm, int ndc) {
    X xs, *x = &xs;
    x_load(x, &s->fl);
    int nd = ndc ? ndc : s->nd, b, rc = 0;
    while ((b = fl_next(x, nd)) >= 0) {
        FDim *D = &x->dm[b];
        double t = D->t;
        unsigned long long k = D->k;
        int item = D->item;
        if (item < 0) {  /* idle: its first arrival starts it (its queue is empty) */
            FItem *e = &x->ib[D->ih++];
            item = e->item;
            *e = FRONT;
            fl_start(s, x, b, item, t);
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

static int fl_loop_dse(Sim *s) { return fl_loop(s, 3, 0); }
static int fl_loop_astra(Sim *s) { return fl_loop(s, 4, 0); }
static int fl_loop_dse4(Sim *s) { return fl_loop(s, 3, 4); }
static int fl_loop_astra4(Sim *s) { return fl_loop(s, 4, 4); }

/* ----- set-up ----------------------------------------------------------------------------------- */
/* *p holds at least n items of `size` bytes (zeroed when new); 0 or -1. */
static int room(void **p, Py_ssize_t *cap, Py_ssize_t n, size_t size) {
    if (n <= *cap) return 0;
    Py_ssize_t c = *cap ? *cap : 16;
    while (c < n) c *= 2;
    void *q = calloc((size_t)c, size);
    if (!q) return -1;
    free(*p);
    *p = q; *cap = c;
    return 0;
}

/* The records of plan positions [j0, j0 + len): one chunk's plan. What does not change between runs
 * on one Sim (its phases' dims, ranks, bytes; the batch's points change busy and delay) is made
 * once (ci[j0] < 0: not yet). */
static void fl_records(const Sim *s, Flow *f, Py_ssize_t j0, int len) {
    if (f->ci[j0] < 0) {
        for (int p = 0; p < len; p++) {
            Py_ssize_t j = j0 + p, i = s->pmap ? s->pmap[j] : j;
            FRec *r = &f->rec[j];
            f->ci[j] = (int)i;
            r->sent = s->ph.sent[i];
            r->dim = (unsigned char)s->ph.dim[i]; r->rank = (unsigned char)s->ph.rank[i];
            r->q = (unsigned short)(r->dim * f->nrank + r->rank);
            r->back = s->ph.fifo[i] || len - p - 1 == 1;
            r->last = p == len - 1;
        }
    }
    for (int p = 0; p < len; p++) {
        FRec *r = &f->rec[j0 + p];
        Py_ssize_t i = f->ci[j0 + p];
        r->busy = s->ph.busy[i]; r->delay = s->ph.delay[i];
    }
}

/* This run's plans: their records (each plan once), how many chunks run each (mult, by its first
 * position) and the list of them (plan). 0 or -1. */
static int fl_plans(Sim *s, Flow *f, int nrank) {
    int n = (int)s->nchunks;
    Py_ssize_t npos = 0, np = f->nplan;
    for (int c = 0; c < n; c++) if (s->cbase[c] + s->clen[c] > npos) npos = s->cbase[c] + s->clen[c];
    if (npos > f->nrec) {  /* records, their phases, stamps and counts by plan position, grown together */
        Py_ssize_t cap = f->nrec ? f->nrec : 16;
        while (cap < npos) cap *= 2;
        FRec *rec = calloc((size_t)cap, sizeof(FRec));  /* all defined */
        int *ci = malloc((size_t)cap * sizeof(int));
        int *stamp = calloc((size_t)cap, sizeof(int)), *mult = calloc((size_t)cap, sizeof(int));
        if (!rec || !ci || !stamp || !mult) { free(rec); free(ci); free(stamp); free(mult); return -1; }
        free(f->rec); free(f->ci); free(f->stamp); free(f->mult);
        f->rec = rec; f->ci = ci; f->stamp = stamp; f->mult = mult; f->nrec = cap; f->run = 0;
        f->nrank = -1;  /* none made yet */
    }
    if (room((void **)&f->plan, &np, n, sizeof(int))) return -1;
    f->nplan = (int)np;
    if (f->nrank != nrank) {  /* the rings' numbering: the records' made again */
        memset(f->ci, 0xff, (size_t)f->nrec * sizeof(int));
        f->nrank = nrank;
    }
    if (f->run >= 0x3fffffff) {  /* the stamps would wrap: none is this run's */
        memset(f->stamp, 0, (size_t)f->nrec * sizeof(int));
        f->run = 0;
    }
    int run = ++f->run, nplans = 0;
    for (int c = 0; c < n; c++) {
        Py_ssize_t j0 = s->cbase[c];
        if (f->stamp[j0] != run) {
            f->stamp[j0] = run;
            f->mult[j0] = 0;
            f->plan[nplans++] = c;
            fl_records(s, f, j0, s->clen[c]);
        }
        f->mult[j0]++;
    }
    return nplans;
}

/* Each inbox's and ring's part of ib and qb, as large as this run's plans can fill it (every
 * arrival at a dim, every phase on a ring); inboxes with their sentinels. 0 or -1. */
static int fl_parts(Sim *s, Flow *f, int nplans, int qm) {
    int nd = s->nd, nq = qm == 3 ? nd * f->nrank : 0;
    Py_ssize_t cd = f->ndm, cq = f->nrg;
    if (room((void **)&f->dm, &cd, nd, sizeof(FDim)) || room((void **)&f->rg, &cq, nq + 1, sizeof(FRing))) return -1;
    f->ndm = (int)cd; f->nrg = (int)cq;
    for (int d = 0; d < nd; d++) f->dm[d].ih = 0;
    for (int q = 0; q < nq; q++) f->rg[q].h = 0;
    for (int i = 0; i < nplans; i++) {  /* counts */
        int c = f->plan[i], len = s->clen[c];
        const FRec *r = &f->rec[s->cbase[c]];
        int m = f->mult[s->cbase[c]];
        for (int p = 0; p < len; p++) {
            if (p) f->dm[r[p].dim].ih += m;
            if (nq) f->rg[r[p].q].h += m;
        }
    }
    Py_ssize_t ni = 0, nb = 0;
    for (int d = 0; d < nd; d++) ni += f->dm[d].ih + 2;
    for (int q = 0; q < nq; q++) nb += f->rg[q].h;
    if (room((void **)&f->ib, &f->nib, ni, sizeof(FItem)) || room((void **)&f->qb, &f->nqb, nb + 1, sizeof(int)))
        return -1;
    Py_ssize_t off = 0;
    for (int d = 0; d < nd; d++) {
        FDim *D = &f->dm[d];
        Py_ssize_t cnt = D->ih;
        f->ib[off] = FRONT; f->ib[off + 1] = BACK;
        D->ih = D->it = (int)off + 1;
        off += cnt + 2;
    }
    off = 0;
    for (int q = 0; q < nq; q++) {
        Py_ssize_t cnt = f->rg[q].h;
        f->rg[q].h = f->rg[q].t = (int)off;
        off += cnt;
    }
    return 0;
}

/* The collective's chunks [0, nchunks) enter their first queues at t, in chunk order (issue). */
int flow_issue(Sim *s, double t) {
    Flow *f = &s->fl;
    int nd = s->nd, n = (int)s->nchunks, qm = s->qmode, top = 0;
    for (Py_ssize_t i = 0; i < s->ph.len; i++) if (s->ph.rank[i] > top) top = s->ph.rank[i];
    int nplans = fl_plans(s, f, top + 1);
    if (nplans < 0 || fl_parts(s, f, nplans, qm)) return -1;
    for (int d = 0; d < nd; d++) {
        FDim *D = &f->dm[d];
        D->item = -1; D->t = NONE_T; D->k = NONE_K;
        D->busy = s->busy[d]; D->sent = s->sent[d]; D->mask = 0; D->cand = -1; D->crank = MAX_RANKS;
    }
    f->nd = nd; f->ctr = 0; f->left = n; f->on = 1; f->bytes = s->bytes_sent; f->finish = s->finish;
    X xs;
    x_load(&xs, f);
    for (int c = 0; c < n; c++) {
        Py_ssize_t j0 = s->cbase[c];
        const FRec *r = &f->rec[j0];
        int item = (int)(j0 << FLOW_CB) | c, d = r->dim;
        if (f->dm[d].item < 0) fl_start(s, &xs, d, item, t);
        else if (fl_enqueue(s, &xs, r, item, d, qm)) return -1;
    }
    x_store(&xs, f);
    return 0;
}

/* The run after flow_issue; then the collective ends with its last chunk. 0, -1 (out of memory). */
int flow_run(Sim *s) {
    Flow *f = &s->fl;
    int four = s->nd == 4, rc;
    if (s->qmode == 3) rc = four ? fl_loop_dse4(s) : fl_loop_dse(s);
    else rc = four ? fl_loop_astra4(s) : fl_loop_astra(s);
    if (rc) return -1;
    if (f->left) return -2;
    for (int d = 0; d < s->nd; d++) { s->busy[d] = f->dm[d].busy; s->sent[d] = f->dm[d].sent; }
    s->bytes_sent = f->bytes; s->finish = f->finish;
    int o = s->owner[0];
    s->remaining[o] = 0;
    return network_end(s, o, s->finish) || dispatch(s, s->finish) ? -1 : 0;
}

void flow_free(Flow *f) {
    free(f->dm); free(f->ib); free(f->qb); free(f->rg); free(f->rec); free(f->ci); free(f->stamp); free(f->mult);
    free(f->plan);
    memset(f, 0, sizeof *f);
}
