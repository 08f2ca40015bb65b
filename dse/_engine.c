/* dse's one event engine in C, its events and network half (the graph half: _graph.c): dse/engine_ref.py
 * step for step (its docstring is the algorithm).
 *
 * Why C: a 1,024-NPU all-reduce at 64 chunks is about 1,000 events; Python spends about 1 ms on
 * them, C about 10 us. One engine serves single collectives (servers with `slots` places, or
 * processor sharing) and workload graphs (computes, dependencies, several collectives in flight);
 * the tests hold it equal to the Python reference to the bit. dse/_batch.c drives the same engine
 * for many points without Python objects (dse.evaluate_many).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include "_engine.h"

/* ----- small growable arrays ------------------------------------------------------------------ */
int grow(void **p, Py_ssize_t *cap, Py_ssize_t need, size_t size) {
    if (need <= *cap) return 0;
    Py_ssize_t nc = *cap ? *cap : 16;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, (size_t)nc * size);
    if (!q) return -1;
    *p = q; *cap = nc;
    return 0;
}

/* ----- the event heap ------------------------------------------------------------------------- */
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

/* Push an event made of its fields (written in place: no temporary struct to copy). `tie`: NULL, or
 * (a1, a2, a3, st) with `dk`. */
/* The compact events live in a 4-ary heap: half the levels of a binary one, its children adjacent. */
static inline int ev2_less(const Ev2 *x, const Ev2 *y) {  /* branch-free: the order is data, not a pattern */
    return (x->t < y->t) | ((x->t == y->t) & (x->key < y->key));
}

/* Put a made event into the heap (its seq already given). */
static int ev2_insert(Sim *s, Ev2 e) {
    if (s->nev == s->evcap && grow((void **)&s->ev2, &s->evcap, s->nev + 1, sizeof(Ev2))) return -1;
    Ev2 *h = s->ev2;
    Py_ssize_t i = s->nev++;
    while (i > 0) {
        Py_ssize_t p = (i - 1) / 4;
        if (!ev2_less(&e, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
    return 0;
}

static int ev2_push(Sim *s, double t, int cls, int kind, int a, int b) {
    Ev2 e;
    e.t = t; e.key = ((unsigned long long)cls << 58) | (unsigned long long)s->counter++;
    e.kind = kind; e.a = a; e.b = b;
    return ev2_insert(s, e);
}

static void ev2_pop(Sim *s, Ev *out) {
    Ev2 *h = s->ev2;
    Ev2 top = h[0], last = h[--s->nev];
    Py_ssize_t i = 0, n = s->nev;
    for (;;) {
        Py_ssize_t c = 4 * i + 1;
        if (c >= n) break;
        Py_ssize_t m = c, end = c + 4 < n ? c + 4 : n;
        for (Py_ssize_t k = c + 1; k < end; k++) m = ev2_less(&h[k], &h[m]) ? k : m;
        if (!ev2_less(&h[m], &last)) break;
        h[i] = h[m];
        i = m;
    }
    if (n > 0) h[i] = last;
    out->t = top.t; out->seq = (long long)(top.key & ((1ULL << 58) - 1)); out->cls = (short)(top.key >> 58);
    out->kind = top.kind; out->a = top.a; out->b = top.b;
}


/* An arrival `delay` after now on dim d: into its lane if the lane is busy and the order holds. */
static int arrive_push(Sim *s, double t, double delay, int c, int d) {
    if (!s->notie) return ev_push(s, t, 0, ARRIVE, c, d, NULL, 0);
    int k = 0;
    while (k < s->nlanes && !(s->lanes[k].dim == d && s->lanes[k].delay == delay)) k++;
    if (k == s->nlanes) {
        if (s->nlanes == s->lanecap) {
            int nc = s->lanecap ? 2 * s->lanecap : 8;
            Lane *nl = realloc(s->lanes, (size_t)nc * sizeof(Lane));
            if (!nl) return -1;
            memset(nl + s->lanecap, 0, (size_t)(nc - s->lanecap) * sizeof(Lane));
            s->lanes = nl; s->lanecap = nc;
        }
        s->lanes[k].dim = d; s->lanes[k].delay = delay; s->lanes[k].head = s->lanes[k].len = 0;
        s->nlanes++;
    }
    Lane *L = &s->lanes[k];
    if (L->len && L->buf[(L->head + L->len - 1) & (L->cap - 1)].t <= t) {  /* behind the lane's last */
        if (L->len == L->cap) {
            int nc = L->cap ? 2 * L->cap : 16;
            Ev2 *nb = malloc((size_t)nc * sizeof(Ev2));
            if (!nb) return -1;
            for (int j = 0; j < L->len; j++) nb[j] = L->buf[(L->head + j) & (L->cap - 1)];
            free(L->buf);
            L->buf = nb; L->cap = nc; L->head = 0;
        }
        Ev2 *e = &L->buf[(L->head + L->len) & (L->cap - 1)];
        e->t = t; e->key = (unsigned long long)s->counter++; e->kind = ARRIVE | ((k + 1) << 8); e->a = c; e->b = d;
        L->len++;
        return 0;
    }
    if (L->len == 0) {  /* the lane's head: in the heap, and remembered as the lane's first */
        if (L->cap == 0) {
            L->buf = malloc(16 * sizeof(Ev2));
            if (!L->buf) return -1;
            L->cap = 16;
        }
        L->head = 0; L->len = 1;
        Ev2 *e = &L->buf[0];
        e->t = t; e->key = (unsigned long long)s->counter; e->kind = ARRIVE | ((k + 1) << 8); e->a = c; e->b = d;
        return ev2_push(s, t, 0, ARRIVE | ((k + 1) << 8), c, d);
    }
    return ev2_push(s, t, 0, ARRIVE, c, d);  /* out of the lane's order: the heap alone */
}

/* After the lane head `kind` left the heap: the lane's next into the heap. */
static int lane_next(Sim *s, int kind) {
    Lane *L = &s->lanes[(kind >> 8) - 1];
    L->head = (L->head + 1) & (L->cap - 1);
    L->len--;
    if (!L->len) return 0;
    return ev2_insert(s, L->buf[L->head]);  /* with its own seq: ordered as if it had been there all along */
}

int ev_push(Sim *s, double t, int cls, int kind, int a, int b, const double *tie, int dk) {
    if (s->notie) return ev2_push(s, t, cls, kind, a, b);
    if (s->nev == s->evcap && grow((void **)&s->ev, &s->evcap, s->nev + 1, sizeof(Ev))) return -1;
    Ev *h = s->ev;
    long long seq = s->counter++;
    double a1 = 0.0, a2 = 0.0, a3 = 0.0, st = 0.0;
    if (tie) { a1 = tie[0]; a2 = tie[1]; a3 = tie[2]; st = tie[3]; }
    Py_ssize_t i = s->nev++;
    while (i > 0) {
        Py_ssize_t p = (i - 1) / 2;
        const Ev *y = &h[p];
        int less;
        if (t != y->t) less = t < y->t;
        else if (cls != y->cls) less = cls < y->cls;
        else if (a1 != y->a1) less = a1 < y->a1;
        else if (a2 != y->a2) less = a2 < y->a2;
        else if (a3 != y->a3) less = a3 < y->a3;
        else if (st != y->st) less = st < y->st;
        else if (dk != y->dk) less = dk < y->dk;
        else less = seq < y->seq;
        if (!less) break;
        h[i] = h[p];
        i = p;
    }
    Ev *e = &h[i];
    e->t = t; e->a1 = a1; e->a2 = a2; e->a3 = a3; e->st = st; e->seq = seq;
    e->cls = (short)cls; e->dk = (short)dk; e->kind = kind; e->a = a; e->b = b;
    return 0;
}

static void ev_pop(Sim *s, Ev *out) {
    Ev *h = s->ev;
    *out = h[0];
    Ev last = h[--s->nev];
    Py_ssize_t i = 0, n = s->nev;
    for (;;) {
        Py_ssize_t l = 2 * i + 1;
        if (l >= n) break;
        Py_ssize_t m = l;
        if (l + 1 < n && ev_less(&h[l + 1], &h[l])) m = l + 1;
        if (!ev_less(&h[m], &last)) break;
        h[i] = h[m];
        i = m;
    }
    if (n > 0) h[i] = last;
}

/* ----- keyed min-heaps: (key, seq, item) -------------------------------------------------------- */
static inline int kh_less(const KItem *x, const KItem *y) {
    if (x->key != y->key) return x->key < y->key;
    return x->seq < y->seq;
}

int kh_push(KHeap *hp, KItem it) {
    if (hp->n == hp->cap && grow((void **)&hp->h, &hp->cap, hp->n + 1, sizeof(KItem))) return -1;
    Py_ssize_t i = hp->n++;
    while (i > 0) {
        Py_ssize_t p = (i - 1) / 2;
        if (!kh_less(&it, &hp->h[p])) break;
        hp->h[i] = hp->h[p];
        i = p;
    }
    hp->h[i] = it;
    return 0;
}

KItem kh_pop(KHeap *hp) {
    KItem top = hp->h[0];
    KItem last = hp->h[--hp->n];
    Py_ssize_t i = 0, n = hp->n;
    for (;;) {
        Py_ssize_t l = 2 * i + 1;
        if (l >= n) break;
        Py_ssize_t m = l;
        if (l + 1 < n && kh_less(&hp->h[l + 1], &hp->h[l])) m = l + 1;
        if (!kh_less(&hp->h[m], &last)) break;
        hp->h[i] = hp->h[m];
        i = m;
    }
    if (n > 0) hp->h[i] = last;
    return top;
}

/* ----- a dimension's waiting phases: a deque with insertion (O(1) at both ends) ----------------- */
static inline KItem *q_at(Deque *q, Py_ssize_t j) { return &q->buf[q->head + j]; }

static int q_room_back(Deque *q) {
    if (q->head + q->len < q->cap) return 0;
    if (q->len >= q->cap / 2) {
        Py_ssize_t nc = q->cap ? 2 * q->cap : 16;
        KItem *nb = realloc(q->buf, (size_t)nc * sizeof(KItem));
        if (!nb) return -1;
        q->buf = nb; q->cap = nc;
    }
    Py_ssize_t nh = (q->cap - q->len) / 4;
    memmove(&q->buf[nh], &q->buf[q->head], (size_t)q->len * sizeof(KItem));
    q->head = nh;
    return 0;
}

static int q_insert(Deque *q, Py_ssize_t j, KItem w) {
    if (j < q->len - j && q->head > 0) {
        memmove(&q->buf[q->head - 1], &q->buf[q->head], (size_t)j * sizeof(KItem));
        q->head -= 1;
    } else {
        if (q_room_back(q)) return -1;
        memmove(q_at(q, j + 1), q_at(q, j), (size_t)(q->len - j) * sizeof(KItem));
    }
    *q_at(q, j) = w;
    q->len += 1;
    return 0;
}

static inline KItem q_pop_front(Deque *q) {
    KItem w = q->buf[q->head];
    q->head += 1;
    q->len -= 1;
    return w;
}

/* ----- chunks --------------------------------------------------------------------------------- */
static inline Py_ssize_t ph_index(const Sim *s, int c) {
    Py_ssize_t j = s->poff[s->cplan[c]] + s->pos[c];
    return s->pmap ? s->pmap[j] : j;
}
static inline int plan_len(const Sim *s, int c) { return (int)(s->poff[s->cplan[c] + 1] - s->poff[s->cplan[c]]); }

/* Add chunks for plan ids `ids[0..n)`, owned by node `owner` with priority `prio`. */
int sim_add_chunks(Sim *s, const int *ids, int n, int owner, long long prio) {
    Py_ssize_t need = s->nchunks + n;
    if (need > s->chcap) {
        Py_ssize_t cap = s->chcap, c2 = cap;
        if (grow((void **)&s->cplan, &c2, need, sizeof(int))) return -1;
        c2 = cap; if (grow((void **)&s->pos, &c2, need, sizeof(int))) return -1;
        c2 = cap; if (grow((void **)&s->owner, &c2, need, sizeof(int))) return -1;
        c2 = cap; if (grow((void **)&s->prio, &c2, need, sizeof(long long))) return -1;
        c2 = cap; if (grow((void **)&s->started, &c2, need, sizeof(double))) return -1;
        c2 = cap; if (grow((void **)&s->chunk_end, &c2, need, sizeof(double))) return -1;
        c2 = cap; if (grow((void **)&s->phase_lead, &c2, need, sizeof(long long))) return -1;
        s->chcap = c2;
    }
    for (int k = 0; k < n; k++) {
        Py_ssize_t c = s->nchunks++;
        s->cplan[c] = ids[k]; s->pos[c] = 0; s->owner[c] = owner; s->prio[c] = prio;
        s->started[c] = 0.0; s->chunk_end[c] = 0.0; s->phase_lead[c] = s->lead;
    }
    return 0;
}

static inline long long lead_after(const Sim *s, long long lead, Py_ssize_t i) {
    int off = s->ph.loff[i];
    if (off < 0) return lead;
    long long stride = s->ph.lstride[i], p = s->ph.lp[i];
    long long c = lead / stride % p;
    return lead + ((long long)s->ph.lpool[off + c] - c) * stride;
}

/* ----- the network ---------------------------------------------------------------------------- */
int enqueue(Sim *s, int c) {
    Py_ssize_t i = ph_index(s, c);
    int d = s->ph.dim[i];
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
        if (s->qmode == 1) {
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
        if (s->qmode == 2) {
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

static inline int q_waiting(const Sim *s, int d) {
    return s->qmode == 1 ? s->bq[d].count > 0 : s->qmode == 2 ? s->aq[d].count > 0 : s->wait[d].len > 0;
}

static inline int q_next(Sim *s, int d) {
    return s->qmode == 1 ? bq_pop(&s->bq[d]) : s->qmode == 2 ? aq_pop(&s->aq[d]) : q_pop_front(&s->wait[d]).item;
}

static int share_schedule(Sim *s, int d) {
    s->gen[d] += 1;
    KHeap *act = &s->active[d];
    if (act->n == 0) return 0;
    double dt = (act->h[0].key - s->vtime[d]) * (double)act->n;
    return ev_push(s, dt > 0.0 ? s->vlast[d] + dt : s->vlast[d], 0, SHARE_DONE, d, s->gen[d], NULL, 0);
}

static int start_phase(Sim *s, int c, int d, double t) {
    Py_ssize_t i = ph_index(s, c);
    double busy = s->ph.busy[i], delay = s->ph.delay[i], sent = s->ph.sent[i];
    s->running[d] += 1;
    s->busy[d] += busy;
    s->sent[d] += sent;
    s->bytes_sent += sent;
    s->started[c] = t;
    if (s->track) s->phase_lead[c] = s->lead;
    if (s->shared) {
        KHeap *act = &s->active[d];
        if (act->n) s->vtime[d] += (t - s->vlast[d]) / (double)act->n;
        s->vlast[d] = t;
        KItem w; w.key = s->vtime[d] + busy; w.seq = s->counter++; w.item = c;
        if (kh_push(act, w)) return -1;
        return share_schedule(s, d);
    }
    double tie[4], *tp = NULL;
    int dk = 0;
    if (s->ph.hastie[i] || s->dimkey) {
        tie[0] = t + s->ph.t1[i]; tie[1] = t + s->ph.t2[i]; tie[2] = t + s->ph.t3[i]; tie[3] = t;
        tp = tie;
        dk = s->dimkey ? d : 0;
    }
    if (delay != 0.0 && t + busy + delay != t + busy) {  /* a delay lost to rounding is none */
        if (ev_push(s, t + busy, 1, RELEASE, c, d, tp, dk)) return -1;
        return tp ? ev_push(s, t + busy + delay, 0, ARRIVE, c, d, tp, dk) : arrive_push(s, t + busy + delay, delay, c, d);
    }
    return ev_push(s, t + busy, 0, COMPLETE, c, d, tp, dk);
}

int refill(Sim *s, int d, double t) {
    while (s->running[d] < s->slots && q_waiting(s, d)) {
        int c = q_next(s, d);
        if (c < 0 || start_phase(s, c, d, t)) return -1;
    }
    return 0;
}


static int phase_end(Sim *s, int ev, int c, int d, double t, int freed) {
    if (s->record) {
        if (s->nlog == s->logcap && grow((void **)&s->logv, &s->logcap, s->nlog + 1, sizeof(LogRec))) return -1;
        LogRec *r = &s->logv[s->nlog++];
        r->c = c; r->step = s->pos[c]; r->start = s->started[c]; r->end = t;
    }
    s->pos[c] += 1;
    int done = -1, d2 = -1;
    if (s->pos[c] < plan_len(s, c)) {
        d2 = enqueue(s, c);
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
        if (refill(s, d, t)) return -1;
        if (d2 >= 0 && d2 != d && refill(s, d2, t)) return -1;
    } else if (d2 >= 0 && refill(s, d2, t)) return -1;
    if (done >= 0 && (network_end(s, done, t) || dispatch(s, t))) return -1;
    return 0;
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

/* Run the loop; 0, -1 (error set, or out of memory: s->nomem), or -2 (stalled). */
int sim_go(Sim *s) {
    Graph *g = &s->g;
    int n = g->n;
    for (Py_ssize_t k = 0; k < g->soff[n]; k++) s->need[g->sdst[k]] += 1;
    for (int i = 0; i < n; i++) if (s->need[i] == 0) s->scratch_roots[s->nroots++] = i;
    for (int k = 0; k < s->nroots; k++) {
        int i = s->scratch_roots[k];
        s->need[i] = 1;
        if (arrive(s, i, i, 0.0)) return -1;
    }
    if (dispatch(s, 0.0)) return -1;
    Ev e;
    while (s->nev > 0) {
        if (s->notie) {
            ev2_pop(s, &e);
            if (e.kind >> 8) {  /* a lane's head */
                if (lane_next(s, e.kind)) return -1;
                e.kind &= 0xff;
            }
        } else ev_pop(s, &e);
        double t = e.t;
        int a = e.a;
        if (e.kind == SHARE_DONE) {
            if (e.b == s->gen[a] && share_done(s, a, t)) return -1;
            continue;
        }
        if (s->track) {
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
    for (int i = 0; i < n; i++) if (s->need[i]) return -2;
    for (int r = 0; r < 3; r++) if (s->ready[r].n || s->taken[r]) return -2;
    return 0;
}

