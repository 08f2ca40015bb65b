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

/* Can this run go here (the file's comment)? Called at the issue of the run's one collective. */
int flow_ok(const Sim *s, Py_ssize_t first) {
    const Graph *g = &s->g;
    return first == 0 && g->n == 1 && g->soff[1] == 0 && !g->ideal && g->delays[0] == 0.0 &&
           !g->end_before_release && s->slots == 1 && !s->shared && s->notie && !s->dimkey && !s->track &&
           !s->record && !s->use_prio && (s->qmode == 3 || s->qmode == 4) && s->nev == 0 && s->nlive == 0;
}

static inline Py_ssize_t ph_at(const Sim *s, int c, int pos) {
    Py_ssize_t j = s->cbase[c] + pos;
    return s->pmap ? s->pmap[j] : j;
}

static inline int earlier(double t1, unsigned long long k1, double t2, unsigned long long k2) {
    return t1 < t2 || (t1 == t2 && k1 < k2);
}

static inline void set_head(Flow *f, int d, double t, unsigned long long k) {
    f->hd[d].t = t; f->hd[d].k = k;
}

/* Chunk c's phase at its pos into dim d's queue (the engine's enqueue_). */
HOT int fl_enqueue(Sim *s, int c, int d, int qm) {
    Py_ssize_t i = ph_at(s, c, s->pos[c]);
    if (qm == 3) return rb_push(&s->rb[d], s->ph.rank[i], c);
    int back = s->ph.fifo[i] || s->clen[c] - s->pos[c] - 1 == 1;
    return ra_insert(&s->ra[d], s->ph.rank[i], c, back);
}

/* An arrival (t, k) of chunk c at dim d, into d's inbox in (t, k) order; the head of an idle d. */
HOT void fl_put(Flow *f, int d, double t, unsigned long long k, int c) {
    Inbox *q = &f->in[d];
    int m = f->cap - 1, j = q->len;
    FItem *b = q->buf;
    while (j > 0) {
        FItem *p = &b[(q->head + j - 1) & m];
        if (!earlier(t, k, p->t, p->k)) break;
        b[(q->head + j) & m] = *p;
        j--;
    }
    FItem *e = &b[(q->head + j) & m];
    e->t = t; e->k = k; e->c = c;
    q->len++;
    if (j == 0 && f->sc[d] < 0) set_head(f, d, t, k);
}

/* The arrivals at dim d before event (t, k) enter its queue, in their order. */
HOT int fl_flush(Sim *s, Flow *f, int d, double t, unsigned long long k, int qm) {
    Inbox *q = &f->in[d];
    while (q->len) {
        FItem *e = &q->buf[q->head];
        if (!earlier(e->t, e->k, t, k)) break;
        int c = e->c;
        q->head = (q->head + 1) & (f->cap - 1);
        q->len--;
        s->pos[c]++;
        if (fl_enqueue(s, c, d, qm)) return -1;
    }
    return 0;
}

/* Dim d starts chunk c's phase at t (the engine's start_phase): its server event, and its arrival
 * into the next dim's inbox (or the chunk's end). */
HOT void fl_start(Sim *s, Flow *f, int d, int c, double t) {
    Py_ssize_t i = ph_at(s, c, s->pos[c]);
    double busy = s->ph.busy[i], delay = s->ph.delay[i], sent = s->ph.sent[i];
    s->busy[d] += busy;
    s->sent[d] += sent;
    s->bytes_sent += sent;
    double end = t + busy;
    f->sc[d] = c;
    if (delay != 0.0 && end + delay != end) {  /* a delay lost to rounding is none */
        f->split[d] = 1;
        set_head(f, d, end, (1ULL << 58) | f->ctr++);
        double ta = end + delay;
        unsigned long long ka = f->ctr++;
        int p = s->pos[c] + 1;
        if (p < s->clen[c]) {
            fl_put(f, s->ph.dim[ph_at(s, c, p)], ta, ka, c);
            return;
        }
        s->pos[c] = p;  /* its last phase: the chunk ends on arrival */
        s->chunk_end[c] = ta;
        if (ta > s->finish) s->finish = ta;
        f->left--;
        return;
    }
    f->split[d] = 0;
    set_head(f, d, end, f->ctr++);
}

/* Dim d, free at t, takes its next waiting phase, or idles until its inbox's first arrival. */
HOT int fl_refill(Sim *s, Flow *f, int d, double t, int qm) {
    int c;
    if (qm == 3 ? s->rb[d].mask != 0 : s->ra[d].mask != 0) {
        c = qm == 3 ? rb_pop(&s->rb[d]) : ra_pop(&s->ra[d]);
        if (c < 0) return -1;
        fl_start(s, f, d, c, t);
        return 0;
    }
    f->sc[d] = -1;
    Inbox *q = &f->in[d];
    if (q->len) set_head(f, d, q->buf[q->head].t, q->buf[q->head].k);
    else set_head(f, d, NONE_T, NONE_K);
    return 0;
}

static inline unsigned long long tbits(double t) {  /* ordered as t for t >= +0 and inf */
    unsigned long long u;
    memcpy(&u, &t, sizeof u);
    return u;
}

/* The least head: its dim, or -1 when every head is empty. */
HOT int fl_next(const Flow *f, int nd) {
    int best = -1;
    const Head *h = f->hd;
#ifdef __SIZEOF_INT128__
    typedef unsigned __int128 u128;
    u128 b = (u128)tbits(NONE_T) << 64 | NONE_K;
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

HOT int fl_loop(Sim *s, int qm) {
    Flow *f = &s->fl;
    int nd = s->nd, b;
    while ((b = fl_next(f, nd)) >= 0) {
        double t = f->hd[b].t;
        unsigned long long k = f->hd[b].k;
        int c = f->sc[b];
        if (c < 0) {  /* idle: its first arrival starts it (its queue is empty) */
            Inbox *q = &f->in[b];
            c = q->buf[q->head].c;
            q->head = (q->head + 1) & (f->cap - 1);
            q->len--;
            s->pos[c]++;
            fl_start(s, f, b, c, t);
            continue;
        }
        if (fl_flush(s, f, b, t, k, qm)) return -1;
        int d2 = -1;
        if (!f->split[b]) {  /* a COMPLETE: the chunk moves on now */
            int p = ++s->pos[c];
            if (p < s->clen[c]) {
                d2 = s->ph.dim[ph_at(s, c, p)];
                if (d2 != b && fl_flush(s, f, d2, t, k, qm)) return -1;
                if ((d2 == b || f->sc[d2] >= 0) && fl_enqueue(s, c, d2, qm)) return -1;
            } else {
                s->chunk_end[c] = t;
                if (t > s->finish) s->finish = t;
                f->left--;
            }
        }
        if (fl_refill(s, f, b, t, qm)) return -1;
        if (d2 >= 0 && d2 != b && f->sc[d2] < 0) fl_start(s, f, d2, c, t);  /* it was idle: c starts there */
    }
    return 0;
}

static int fl_loop_dse(Sim *s) { return fl_loop(s, 3); }
static int fl_loop_astra(Sim *s) { return fl_loop(s, 4); }

/* The collective's chunks [0, nchunks) enter their first queues at t, in chunk order (issue). */
int flow_issue(Sim *s, double t) {
    Flow *f = &s->fl;
    int nd = s->nd, n = (int)s->nchunks;
    if (f->nd != nd || f->cap < n) {
        int cap = 8;
        while (cap < n) cap *= 2;
        flow_free(f);
        f->in = calloc((size_t)nd, sizeof(Inbox));
        if (!f->in) return -1;
        f->nd = nd;
        f->hd = malloc((size_t)nd * sizeof(Head));
        f->sc = malloc((size_t)nd * sizeof(int));
        f->split = malloc((size_t)nd);
        if (!f->hd || !f->sc || !f->split) return -1;
        for (int d = 0; d < nd; d++) if (!(f->in[d].buf = malloc((size_t)cap * sizeof(FItem)))) return -1;
        f->cap = cap;
    }
    for (int d = 0; d < nd; d++) {
        f->in[d].head = f->in[d].len = 0;
        f->sc[d] = -1;
        set_head(f, d, NONE_T, NONE_K);
    }
    f->ctr = 0; f->left = n; f->on = 1;
    int qm = s->qmode;
    for (int c = 0; c < n; c++) {
        int d = s->ph.dim[ph_at(s, c, 0)];
        if (f->sc[d] < 0) fl_start(s, f, d, c, t);
        else if (fl_enqueue(s, c, d, qm)) return -1;
    }
    return 0;
}

/* The run after flow_issue; then the collective ends with its last chunk. 0, -1 (out of memory). */
int flow_run(Sim *s) {
    Flow *f = &s->fl;
    if ((s->qmode == 3 ? fl_loop_dse(s) : fl_loop_astra(s))) return -1;
    if (f->left) return -2;
    int o = s->owner[0];
    s->remaining[o] = 0;
    return network_end(s, o, s->finish) || dispatch(s, s->finish) ? -1 : 0;
}

void flow_free(Flow *f) {
    if (f->in) for (int d = 0; d < f->nd; d++) free(f->in[d].buf);
    free(f->in); free(f->hd); free(f->sc); free(f->split);
    memset(f, 0, sizeof *f);
}
