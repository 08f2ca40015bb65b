/* dse's one event engine in C, its network half and its loops (events: _events.c; the graph half:
 * _graph.c): dse/sim/engine_ref.py step for step (its docstring is the algorithm).
 *
 * Why C: a 1,024-NPU all-reduce at 64 chunks is about 1,000 events; Python spends about 1 ms on
 * them, C about 10 us. One engine serves single collectives (servers with `slots` places, or
 * processor sharing) and workload graphs (computes, dependencies, several collectives in flight);
 * the tests hold it equal to the Python reference to the bit. dse/sim/_batch.c drives the same engine
 * for many points without Python objects (dse.evaluate_many); a single collective on servers runs in
 * dse/sim/_flow.c (the same run with fewer events: docs/model.md §6.6).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include "_engine.h"
#include "_ranked.h"

/* ----- the next event ------------------------------------------------------------------------- */
static inline void head_set(Sim *s, int k, double t, unsigned long long key, int kind, int a, int b) {
    Ev2 *e = &s->heads[k];
    e->t = t; e->key = key; e->kind = kind; e->a = a; e->b = b;
    s->nlive++;
}

/* An arrival `delay` after now on dim d: into its lane if the order holds, else into the heap. */
static int arrive_push(Sim *s, double t, double delay, int c, int d) {
    if (!s->notie) return ev_push(s, t, 0, ARRIVE, c, d, NULL, 0);
    int k = s->lastlane[d];
    if (!(k < s->nlanes && s->lanes[k].dim == d && s->lanes[k].delay == delay) && (k = lane_of(s, d, delay)) == -1)
        return -1;
    Lane *L = &s->lanes[k];
    if (k == -2 || (L->len && L->buf[(L->head + L->len - 1) & (L->cap - 1)].t > t))
        return ev2_push(s, t, 0, ARRIVE, c, d);  /* out of the lane's order: the heap */
    if (L->len == L->cap && lane_room(L)) return -1;
    Ev2 *e = &L->buf[(L->head + L->len) & (L->cap - 1)];
    e->t = t; e->key = (unsigned long long)s->counter++; e->kind = ARRIVE; e->a = c; e->b = d;
    if (L->len++ == 0) { s->heads[s->nd + k] = *e; s->nlive++; }
    return 0;
}

/* Take the next event (the least of the heap's top and the heads). */
static inline unsigned long long time_bits(double t) {  /* ordered as t for t >= +0 and inf */
    unsigned long long u;
    memcpy(&u, &t, sizeof u);
    return u;
}

HOT void ev2_take(Sim *s, Ev *out) {
    int n = s->nd + s->nlanes, best = -1;
    /* (t, key) compared as one number: the time's bits (which order as the times do, every time
     * being +0 or more, sums of non-negative costs), then the key. */
    const Ev2 *h = s->heads;
#ifdef __SIZEOF_INT128__
    typedef unsigned __int128 u128;
    u128 b = ~(u128)0;
    if (s->nev) b = (u128)time_bits(s->ev2[0].t) << 64 | s->ev2[0].key;
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 8
#endif
    for (int k = 0; k < n; k++) {
        u128 v = (u128)time_bits(h[k].t) << 64 | h[k].key;
        if (v < b) { b = v; best = k; }
    }
#else
    unsigned long long bt = time_bits(INFINITY), bk = ~0ULL;
    if (s->nev) bt = time_bits(s->ev2[0].t), bk = s->ev2[0].key;
    for (int k = 0; k < n; k++) {
        unsigned long long ht = time_bits(h[k].t), hk = h[k].key;
        if (ht < bt || (ht == bt && hk < bk)) { bt = ht; bk = hk; best = k; }
    }
#endif
    if (best < 0) { ev2_pop(s, out); return; }
    Ev2 e = s->heads[best];
    out->t = e.t; out->seq = (long long)(e.key & ((1ULL << 58) - 1)); out->cls = (short)(e.key >> 58);
    out->kind = e.kind; out->a = e.a; out->b = e.b;
    s->nlive--;
    if (best < s->nd) { s->heads[best].t = INFINITY; s->heads[best].key = ~0ULL; return; }
    Lane *L = &s->lanes[best - s->nd];
    L->head = (L->head + 1) & (L->cap - 1);
    if (--L->len) { s->heads[best] = L->buf[L->head]; s->nlive++; }
    else { s->heads[best].t = INFINITY; s->heads[best].key = ~0ULL; }
}

/* The TIED loop's server event of dim d, made as ev_push makes it (its seq the next count). */
static inline void thead_set(Sim *s, int d, double t, int cls, int kind, int c, const double *tie, int dk) {
    Ev *e = &s->theads[d];
    e->t = t; e->seq = s->counter++; e->cls = (short)cls; e->dk = (short)dk; e->kind = kind; e->a = c; e->b = d;
    if (tie) { e->a1 = tie[0]; e->a2 = tie[1]; e->a3 = tie[2]; e->st = tie[3]; }
    else e->a1 = e->a2 = e->a3 = e->st = 0.0;
    s->nlive++;
}

/* The TIED loop's next event: the least, by ev_less, of the heap's top and the dims' server events
 * (one at most per dim: one place each; an empty one has t = inf). The least time is found without
 * branches (which source wins is data); ev_less settles equal times. */
HOT void ev_take_tied(Sim *s, Ev *out) {
    const Ev *h = s->theads;
    int nd = s->nd, best = -1, ties = 0;
    double bt = s->nev ? s->ev[0].t : INFINITY;
    for (int d = 0; d < nd; d++) {
        int lt = h[d].t < bt;
        best = lt ? d : best;
        bt = lt ? h[d].t : bt;
    }
    for (int d = 0; d < nd; d++) ties += h[d].t == bt;
    if (ties > 1 || (ties == 1 && s->nev && s->ev[0].t == bt)) {  /* equal times: the whole order */
        const Ev *b = s->nev ? &s->ev[0] : NULL;
        best = -1;
        for (int d = 0; d < nd; d++)
            if (h[d].kind >= 0 && (!b || ev_less(&h[d], b))) { b = &h[d]; best = d; }
    }
    if (best < 0) { ev_pop(s, out); return; }
    *out = s->theads[best];
    s->theads[best].kind = -1;
    s->theads[best].t = INFINITY;
    s->nlive--;
}

/* ----- chunks --------------------------------------------------------------------------------- */
static inline Py_ssize_t ph_index(const Sim *s, int c) {
    Py_ssize_t j = s->cbase[c] + s->pos[c];
    return s->pmap ? s->pmap[j] : j;
}
static inline int plan_len(const Sim *s, int c) { return s->clen[c]; }

static inline long long lead_after(const Sim *s, long long lead, Py_ssize_t i) {
    int off = s->ph.loff[i];
    if (off < 0) return lead;
    long long stride = s->ph.lstride[i], p = s->ph.lp[i];
    long long c = lead / stride % p;
    return lead + ((long long)s->ph.lpool[off + c] - c) * stride;
}

/* ----- the network ----------------------------------------------------------------------------
 * The hot steps take `fast` and `qm`, constants where sim_go runs a specialised loop (one phase
 * per dim at a time, ranked smallest-first queues, no lead, log or priorities; COMPACT: compact
 * events, each dim's in its head; TIED: events with tie keys), so the compiler drops every test
 * those settle; GENERAL and s->qmode elsewhere. */
enum { GENERAL = 0, COMPACT = 1, TIED = 2 };

/* Put chunk c's next phase in its dim's queue; the dim, or -1. The ranked queues exist only for
 * smallest-first without priorities (sim_use_ranks). */
HOT int enqueue_(Sim *s, int c, QMode qm) {
    Py_ssize_t i = ph_index(s, c);
    int d = s->ph.dim[i];
    if (qm == QM_RANKED_DSE) {
        s->counter++;  /* the seq dse's rule gives every waiting phase (kept: later seqs depend on it) */
        return rb_push(&s->rb[d], s->ph.rank[i], c) ? -1 : d;
    }
    if (qm == QM_RANKED_ASTRA) {
        int back = s->ph.fifo[i] || plan_len(s, c) - s->pos[c] - 1 == 1;
        return ra_insert(&s->ra[d], s->ph.rank[i], c, back) ? -1 : d;
    }
    if (qm == QM_FIXED) {  /* a fixed service order: the chunk waits at d (_queues.c) */
        s->fat[c] = d;
        return d;
    }
    double key = s->ph.key[i];
    KItem w; w.key = key; w.seq = 0; w.item = c;
    if (s->use_prio && (s->policy == FIFO || s->ph.fifo[i])) {
        Deque *q = &s->wait[d];
        long long p = s->prio[c];
        Py_ssize_t j = q->len;
        if (j && s->prio[q_at(q, j - 1)->item] < p) {
            j = 0;
            while (s->prio[q_at(q, j)->item] >= p) j++;
        }
        if (q_insert(q, j, w)) return -1;
    } else if (s->policy == FIFO) {
        if (q_insert(&s->wait[d], s->wait[d].len, w)) return -1;
    } else if (s->policy == SCF_PRIORITY) {
        w.seq = s->counter++;
        if (qm == QM_BUCKETS) {
            if (bq_push(&s->bq[d], key, c)) return -1;
        } else {  /* insort_right on (key, seq) into a list that priorities may disorder */
            Deque *q = &s->wait[d];
            Py_ssize_t lo = 0, hi = q->len;
            while (lo < hi) {
                Py_ssize_t mid = (lo + hi) / 2;
                if (kh_less(&w, q_at(q, mid))) hi = mid; else lo = mid + 1;
            }
            if (q_insert(q, lo, w)) return -1;
        }
    } else {
        int back = s->ph.fifo[i] || plan_len(s, c) - s->pos[c] - 1 == 1;
        if (qm == QM_ASTRA) {
            if (aq_insert(&s->aq[d], key, c, back)) return -1;
        } else {
            Deque *q = &s->wait[d];
            Py_ssize_t j = q->len;
            if (!back) for (j = 0; j < q->len; j++) if (q_at(q, j)->key >= key) break;
            if (q_insert(q, j, w)) return -1;
        }
    }
    return d;
}

int enqueue(Sim *s, int c) { return enqueue_(s, c, s->qmode); }

HOT int q_waiting(const Sim *s, int d, QMode qm) {
    switch (qm) {
    case QM_BUCKETS: return s->bq[d].count > 0;
    case QM_ASTRA: return s->aq[d].count > 0;
    case QM_RANKED_DSE: return s->rb[d].mask != 0;
    case QM_RANKED_ASTRA: return s->ra[d].mask != 0;
    case QM_FIXED: return fq_ready(s, d);
    case QM_DEQUE: break;
    }
    return s->wait[d].len > 0;
}

HOT int q_next(Sim *s, int d, QMode qm) {
    switch (qm) {
    case QM_BUCKETS: return bq_pop(&s->bq[d]);
    case QM_ASTRA: return aq_pop(&s->aq[d]);
    case QM_RANKED_DSE: return rb_pop(&s->rb[d]);
    case QM_RANKED_ASTRA: return ra_pop(&s->ra[d]);
    case QM_FIXED: return fq_take(s, d);
    case QM_DEQUE: break;
    }
    return q_pop_front(&s->wait[d]).item;
}

static int share_schedule(Sim *s, int d) {
    s->gen[d] += 1;
    KHeap *act = &s->active[d];
    if (act->n == 0) return 0;
    double dt = (act->h[0].key - s->vtime[d]) * (double)act->n;
    return ev_push(s, dt > 0.0 ? s->vlast[d] + dt : s->vlast[d], 0, SHARE_DONE, d, s->gen[d], NULL, 0);
}

static int start_shared(Sim *s, int c, int d, double t, double busy) {
    KHeap *act = &s->active[d];
    if (act->n) s->vtime[d] += (t - s->vlast[d]) / (double)act->n;
    s->vlast[d] = t;
    KItem w; w.key = s->vtime[d] + busy; w.seq = s->counter++; w.item = c;
    if (kh_push(act, w)) return -1;
    return share_schedule(s, d);
}

HOT int start_phase(Sim *s, int c, int d, double t, int fast) {
    Py_ssize_t i = ph_index(s, c);
    double busy = s->ph.busy[i], delay = s->ph.delay[i], sent = s->ph.sent[i];
    s->running[d] += 1;
    s->busy[d] += busy;
    s->sent[d] += sent;
    s->bytes_sent += sent;
    if (!fast) {
        s->started[c] = t;
        if (s->track) s->phase_lead[c] = s->lead;
        if (s->shared) return start_shared(s, c, d, t, busy);
    }
    double tie[4], *tp = NULL;
    int dk = 0;
    if (fast != COMPACT && (s->ph.hastie[i] || s->dimkey)) {
        tie[0] = t + s->ph.t1[i]; tie[1] = t + s->ph.t2[i]; tie[2] = t + s->ph.t3[i]; tie[3] = t;
        tp = tie;
        dk = s->dimkey ? d : 0;
    }
    int srv = fast == COMPACT || (!fast && s->srv);
    if (delay != 0.0 && t + busy + delay != t + busy) {  /* a delay lost to rounding is none */
        if (srv) head_set(s, d, t + busy, (1ULL << 58) | (unsigned long long)s->counter++, RELEASE, c, d);
        else if (fast == TIED) thead_set(s, d, t + busy, 1, RELEASE, c, tp, dk);
        else if (ev_push(s, t + busy, 1, RELEASE, c, d, tp, dk)) return -1;
        return tp ? ev_push(s, t + busy + delay, 0, ARRIVE, c, d, tp, dk) : arrive_push(s, t + busy + delay, delay, c, d);
    }
    if (srv) { head_set(s, d, t + busy, (unsigned long long)s->counter++, COMPLETE, c, d); return 0; }
    if (fast == TIED) { thead_set(s, d, t + busy, 0, COMPLETE, c, tp, dk); return 0; }
    return ev_push(s, t + busy, 0, COMPLETE, c, d, tp, dk);
}

HOT int refill_(Sim *s, int d, double t, int fast, QMode qm) {
    if (fast) {  /* one place per dim */
        if (s->running[d] || !q_waiting(s, d, qm)) return 0;
        int c = q_next(s, d, qm);
        return c < 0 || start_phase(s, c, d, t, fast) ? -1 : 0;
    }
    while (s->running[d] < s->slots && q_waiting(s, d, qm)) {
        int c = q_next(s, d, qm);
        if (c < 0 || start_phase(s, c, d, t, 0)) return -1;
    }
    return 0;
}

int refill(Sim *s, int d, double t) { return refill_(s, d, t, GENERAL, s->qmode); }

static int log_phase(Sim *s, int c, double t) {
    if (s->nlog == s->logcap && grow((void **)&s->logv, &s->logcap, s->nlog + 1, sizeof(LogRec))) return -1;
    LogRec *r = &s->logv[s->nlog++];
    r->c = c; r->step = s->pos[c]; r->start = s->started[c]; r->end = t;
    return 0;
}

HOT int phase_end_(Sim *s, int ev, int c, int d, double t, int freed, int fast, QMode qm) {
    if (!fast && s->record && log_phase(s, c, t)) return -1;
    s->pos[c] += 1;
    int done = -1, d2 = -1;
    if (s->pos[c] < plan_len(s, c)) {
        d2 = enqueue_(s, c, qm);
        if (d2 < 0) return -1;
    } else {
        s->chunk_end[c] = t;
        if (t > s->finish) s->finish = t;
        int o = s->owner[c];
        if (--s->remaining[o] == 0) done = o;
    }
    if (done >= 0 && s->g.end_before_release) {
        if (network_end(s, done, t) || dispatch(s, t)) return -1;
        done = -1;
    }
    if (ev == COMPLETE) {
        if (!freed) s->running[d] -= 1;
        if (refill_(s, d, t, fast, qm)) return -1;
        if (d2 >= 0 && d2 != d && refill_(s, d2, t, fast, qm)) return -1;
    } else if (d2 >= 0 && refill_(s, d2, t, fast, qm)) return -1;
    if (done >= 0 && (network_end(s, done, t) || dispatch(s, t))) return -1;
    return 0;
}

static int phase_end(Sim *s, int ev, int c, int d, double t, int freed) {
    return phase_end_(s, ev, c, d, t, freed, GENERAL, s->qmode);
}

static int share_done(Sim *s, int d, double t) {
    KHeap *act = &s->active[d];
    double tag = act->h[0].key;
    s->vtime[d] = tag; s->vlast[d] = t;
    Py_ssize_t first = s->nscratch;
    while (act->n && act->h[0].key == tag) {
        if (s->nscratch == s->scratchcap && grow((void **)&s->scratch, &s->scratchcap, s->nscratch + 1, sizeof(int)))
            return -1;
        s->scratch[s->nscratch++] = kh_pop(act).item;
    }
    s->running[d] -= (int)(s->nscratch - first);
    if (share_schedule(s, d)) return -1;
    for (Py_ssize_t k = first; k < s->nscratch; k++) {
        int c = s->scratch[k];
        Py_ssize_t i = ph_index(s, c);
        if (s->track) s->lead = lead_after(s, s->phase_lead[c], i);
        if (s->ph.delay[i] != 0.0) {
            if (ev_push(s, t + s->ph.delay[i], 0, ARRIVE, c, d, NULL, 0) || refill(s, d, t)) return -1;  /* shared: no lanes */
        } else if (phase_end(s, COMPLETE, c, d, t, 1)) return -1;
    }
    s->nscratch = first;
    return 0;
}

/* The loop over events; `fast` and `qm` as for the hot steps above. */
HOT int loop_(Sim *s, int fast, QMode qm) {
    Ev e;
    while (s->nev > 0 || s->nlive > 0) {
        if (fast == COMPACT || (!fast && s->notie)) ev2_take(s, &e);
        else if (fast == TIED) ev_take_tied(s, &e);
        else ev_pop(s, &e);
        double t = e.t;
        int a = e.a;
        if (fast) {  /* the network's events first: they are nearly all */
            if (e.kind == RELEASE) {
                s->running[e.b] -= 1;
                if (refill_(s, (int)e.b, t, fast, qm)) return -1;
                continue;
            }
            if (e.kind <= ARRIVE) {
                if (phase_end_(s, e.kind, a, (int)e.b, t, 0, fast, qm)) return -1;
                continue;
            }
        }
        if (e.kind == SHARE_DONE) {
            if (e.b == s->gen[a] && share_done(s, a, t)) return -1;
            continue;
        }
        if (!fast && s->track) {
            if (e.kind == LAG) {  /* binary search of its seq */
                Py_ssize_t lo = 0, hi = s->nlag - 1;
                while (lo < hi) { Py_ssize_t mid = (lo + hi) / 2; if (s->lagseq[mid] < e.seq) lo = mid + 1; else hi = mid; }
                s->lead = s->laglead[lo];
            }
            else if (e.kind >= COMM_DONE) s->lead = s->node_lead[a];
            else s->lead = lead_after(s, s->phase_lead[a], ph_index(s, a));
        }
        int rc = 0;
        switch (e.kind) {
        case COMPUTE_DONE:
            s->taken[e.b] = 0;
            s->end[a] = t;
            rc = release_node(s, a, t) || dispatch(s, t);
            break;
        case LAG:
            rc = arrive(s, a, (int)e.b, t) || dispatch(s, t);
            break;
        case COMM_DONE:
            rc = (e.b == 0 ? network_end(s, a, t) : release_node(s, a, t)) || dispatch(s, t);
            break;
        case RELEASE:
            s->running[e.b] -= 1;
            rc = refill(s, (int)e.b, t);
            break;
        default:
            rc = phase_end(s, e.kind, a, (int)e.b, t, 0);
        }
        if (rc) return -1;
    }
    return 0;
}

static int loop_generic(Sim *s) { return loop_(s, GENERAL, s->qmode); }
static int loop_compact_dse(Sim *s) { return loop_(s, COMPACT, QM_RANKED_DSE); }
static int loop_compact_astra(Sim *s) { return loop_(s, COMPACT, QM_RANKED_ASTRA); }
static int loop_tied_dse(Sim *s) { return loop_(s, TIED, QM_RANKED_DSE); }
static int loop_tied_astra(Sim *s) { return loop_(s, TIED, QM_RANKED_ASTRA); }

const char *const LOOP_NAMES[LOOP_COUNT] = {
    "generic", "compact_dse", "compact_astra", "tied_dse", "tied_astra",
    "flow_dse", "flow_astra", "flow_dse_4d", "flow_astra_4d",
};
long long loop_runs[LOOP_COUNT];

/* The specialised loops' conditions: one place per dim, ranked queues, no lead, log or priorities. */
static int sim_plain(const Sim *s) {
    return s->slots == 1 && !s->shared && !s->track && !s->record && !s->use_prio &&
           (s->qmode == QM_RANKED_DSE || s->qmode == QM_RANKED_ASTRA);
}

int sim_compact(const Sim *s) { return sim_plain(s) && s->srv && !s->dimkey; }

/* The loop for this run, its roots issued (a flow run was set up by its issue: flow_ok). */
static Loop pick_loop(const Sim *s) {
    int dse = s->qmode == QM_RANKED_DSE;
    if (s->fl.on && s->nd == 4) return dse ? LOOP_FLOW_DSE_4D : LOOP_FLOW_ASTRA_4D;
    if (s->fl.on) return dse ? LOOP_FLOW_DSE : LOOP_FLOW_ASTRA;
    if (sim_compact(s)) return dse ? LOOP_COMPACT_DSE : LOOP_COMPACT_ASTRA;
    if (sim_plain(s) && !s->notie) return dse ? LOOP_TIED_DSE : LOOP_TIED_ASTRA;
    return LOOP_GENERIC;
}

static int run_loop(Sim *s) {
    switch (s->loop) {
    case LOOP_COMPACT_DSE: return loop_compact_dse(s);
    case LOOP_COMPACT_ASTRA: return loop_compact_astra(s);
    case LOOP_TIED_DSE: return loop_tied_dse(s);
    case LOOP_TIED_ASTRA: return loop_tied_astra(s);
    case LOOP_FLOW_DSE: case LOOP_FLOW_ASTRA: case LOOP_FLOW_DSE_4D: case LOOP_FLOW_ASTRA_4D: return flow_run(s);
    default: return loop_generic(s);
    }
}

/* Run the loop; 0, -1 (error set, or out of memory: s->nomem), -2 (stalled), or -3 (a fixed service
 * order not followed to its end: s->stall). s->loop: the loop that ran (counted in loop_runs). */
int sim_go(Sim *s) {
    Graph *g = &s->g;
    int n = g->n;
    s->srv = s->notie && s->slots == 1 && !s->shared;
    if (s->notie && heads_room(s, s->nd)) return -1;
    for (Py_ssize_t k = 0; k < g->soff[n]; k++) s->need[g->sdst[k]] += 1;
    for (int i = 0; i < n; i++) if (s->need[i] == 0) s->scratch_roots[s->nroots++] = i;
    for (int k = 0; k < s->nroots; k++) {
        int i = s->scratch_roots[k];
        s->need[i] = 1;
        if (arrive(s, i, i, 0.0)) return -1;
    }
    if (dispatch(s, 0.0)) return -1;
    s->loop = pick_loop(s);
    ATOMIC_ADD(&loop_runs[s->loop], 1);
    int rc = run_loop(s);
    if (rc) return rc;
    if (s->qmode == QM_FIXED && fq_stalled(s)) return -3;
    for (int i = 0; i < n; i++) if (s->need[i]) return -2;
    for (int r = 0; r < 3; r++) if (s->ready[r].n || s->taken[r]) return -2;
    return 0;
}
