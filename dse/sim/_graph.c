/* dse's event engine, its graph half: nodes, resources and dependencies (dse/sim/engine_ref.py says what
 * each step does), and the engine's set-up and tear-down. The network half is dse/sim/_engine.c. */
#include "_engine.h"
#include <math.h>

/* ----- the graph ------------------------------------------------------------------------------ */

int issue(Sim *s, int i, double t) {
    s->start[i] = t;
    s->node_lead[i] = s->lead;
    if (s->in_flight == 0) s->comm_since = t;
    s->in_flight += 1;
    if (s->g.ideal) return ev_push(s, t + s->g.ideal[i], 2, COMM_DONE, i, 0, NULL, 0);
    Py_ssize_t first = s->nchunks;
    if (s->issue_cb(s, i, t)) return -1;
    int n = (int)(s->nchunks - first);
    if (n == 0) return ev_push(s, t, 2, COMM_DONE, i, 0, NULL, 0);
    s->remaining[i] = n;
    if (flow_ok(s, first)) return flow_issue(s, t);  /* the run is _flow.c's */
    for (Py_ssize_t c = first; c < s->nchunks; c++) {
        int d = enqueue(s, (int)c);
        if (d < 0 || refill(s, d, t)) return -1;
    }
    return 0;
}

int arrive(Sim *s, int src, int x, double t) {
    Graph *g = &s->g;
    if (g->kinds[src] == N_COMM || s->by_comm[src]) {
        if (t > s->comm_rel[x]) s->comm_rel[x] = t;
    } else if (t > s->other_rel[x]) s->other_rel[x] = t;
    if (--s->need[x]) return 0;
    if (s->comm_rel[x] > s->other_rel[x]) {
        s->by_comm[x] = 1;
        if (g->kinds[x] != N_COMM && s->resumed_cb && s->resumed_cb(s)) return -1;
    }
    int r = g->res[x];
    if (r < 0) {
        s->start[x] = s->end[x] = t;
        return release_node(s, x, t);
    }
    if (r == NET && !g->comm_exclusive && g->kinds[x] == N_COMM) return issue(s, x, t);
    KItem w; w.key = g->by_id ? (double)x : t; w.seq = s->counter++; w.item = x;
    return kh_push(&s->ready[r], w);
}

int release_node(Sim *s, int x, double t) {
    Graph *g = &s->g;
    for (Py_ssize_t k = g->soff[x]; k < g->soff[x + 1]; k++) {
        int y = g->sdst[k];
        double lag = g->slag[k];
        if (lag != 0.0) {
            if (s->track) {  /* the lead this LAG event will carry, by its seq (pushed in seq order) */
                Py_ssize_t n = s->nlag;
                if (n == s->lagcap) {
                    Py_ssize_t c2 = s->lagcap;
                    if (grow((void **)&s->lagseq, &c2, n + 1, sizeof(long long))) return -1;
                    c2 = s->lagcap;
                    if (grow((void **)&s->laglead, &c2, n + 1, sizeof(long long))) return -1;
                    s->lagcap = c2;
                }
                s->lagseq[n] = s->counter; s->laglead[n] = s->lead; s->nlag = n + 1;
            }
            if (ev_push(s, t + lag, 4, LAG, x, y, NULL, 0)) return -1;
        } else if (arrive(s, x, y, t)) return -1;
    }
    return 0;
}

int network_end(Sim *s, int i, double t) {
    if (s->g.comm_exclusive) s->taken[NET] = 0;
    if (--s->in_flight == 0) s->comm_ns += t - s->comm_since;
    s->end[i] = t;
    s->node_lead[i] = s->lead;
    double delay = s->g.delays[i];
    if (delay != 0.0) return ev_push(s, t + delay, 2, COMM_DONE, i, 1, NULL, 0);
    return release_node(s, i, t);
}

int dispatch(Sim *s, double t) {
    Graph *g = &s->g;
    for (int r = GPU; r <= NET; r++) {
        KHeap *q = &s->ready[r];
        while (q->n && !s->taken[r]) {
            int x = kh_pop(q).item;
            s->taken[r] = r == NET ? g->comm_exclusive : 1;
            if (g->kinds[x] == N_COMM) {
                if (issue(s, x, t)) return -1;
                continue;
            }
            double dur = g->dur[x];
            if (g->kinds[x] == N_COMPUTE) {
                if (r == GPU) s->compute_ns += dur; else s->cpu_ns += dur;
            }
            if (dur < g->min_ns) dur = g->min_ns;
            s->start[x] = t;
            s->node_lead[x] = s->lead;
            if (ev_push(s, t + dur, 3, COMPUTE_DONE, x, r, NULL, 0)) return -1;
        }
    }
    return 0;
}

/* Add chunks for plan ids `ids[0..n)`, owned by node `owner` with priority `prio`. */
int sim_add_chunks(Sim *s, const int *ids, int n, int owner, long long prio) {
    Py_ssize_t need = s->nchunks + n;
    if (need > s->chcap) {
        Py_ssize_t cap = s->chcap, c2 = cap;
        if (grow((void **)&s->cbase, &c2, need, sizeof(Py_ssize_t))) return -1;
        c2 = cap; if (grow((void **)&s->clen, &c2, need, sizeof(int))) return -1;
        c2 = cap; if (grow((void **)&s->pos, &c2, need, sizeof(int))) return -1;
        c2 = cap; if (grow((void **)&s->owner, &c2, need, sizeof(int))) return -1;
        c2 = cap; if (grow((void **)&s->prio, &c2, need, sizeof(long long))) return -1;
        c2 = cap; if (grow((void **)&s->started, &c2, need, sizeof(double))) return -1;
        c2 = cap; if (grow((void **)&s->chunk_end, &c2, need, sizeof(double))) return -1;
        c2 = cap; if (grow((void **)&s->phase_lead, &c2, need, sizeof(long long))) return -1;
        if (s->qmode == QM_FIXED) { c2 = cap; if (grow((void **)&s->fat, &c2, need, sizeof(int))) return -1; }
        s->chcap = c2;
    }
    for (int k = 0; k < n; k++) {
        Py_ssize_t c = s->nchunks++;
        s->cbase[c] = s->poff[ids[k]]; s->clen[c] = (int)(s->poff[ids[k] + 1] - s->poff[ids[k]]);
        s->pos[c] = 0; s->owner[c] = owner; s->prio[c] = prio;
        s->started[c] = 0.0; s->chunk_end[c] = 0.0; s->phase_lead[c] = s->lead;
        if (s->fat) s->fat[c] = -1;
    }
    return 0;
}

/* ----- set-up and tear-down ------------------------------------------------------------------- */
int sim_init(Sim *s, int nd, int policy, int slots, int shared, int dimkey, int use_prio, int track, int record,
             int nnodes) {
    memset(s, 0, sizeof *s);
    s->nd = nd; s->policy = policy; s->slots = slots; s->shared = shared; s->dimkey = dimkey;
    s->use_prio = use_prio; s->track = track; s->record = record;
    s->qmode = policy == FIXED_SEQ ? QM_FIXED : use_prio || policy == FIFO ? QM_DEQUE
              : policy == SCF_PRIORITY ? QM_BUCKETS : QM_ASTRA;
    if (policy == FIXED_SEQ && !(s->fnext = calloc(nd, sizeof(Py_ssize_t)))) return -1;  /* the caller sets fseq, foff */
    s->wait = calloc(nd, sizeof(Deque));
    s->bq = calloc(nd, sizeof(Buckets));
    s->aq = calloc(nd, sizeof(Astra));
    if (s->aq) for (int d = 0; d < nd; d++) aq_free(&s->aq[d]);
    s->active = calloc(nd, sizeof(KHeap));
    s->running = calloc(nd, sizeof(int));
    s->busy = calloc(nd, sizeof(double));
    s->sent = calloc(nd, sizeof(double));
    s->vtime = calloc(nd, sizeof(double));
    s->vlast = calloc(nd, sizeof(double));
    s->gen = calloc(nd, sizeof(int));
    s->lastlane = calloc(nd, sizeof(int));
    s->theads = malloc(nd * sizeof(Ev));
    int n = nnodes > 0 ? nnodes : 1;
    s->need = calloc(n, sizeof(int));
    s->start = malloc(n * sizeof(double));
    s->end = malloc(n * sizeof(double));
    s->comm_rel = malloc(n * sizeof(double));
    s->other_rel = malloc(n * sizeof(double));
    s->by_comm = calloc(n, 1);
    s->remaining = calloc(n, sizeof(int));
    s->node_lead = calloc(n, sizeof(long long));
    s->scratch_roots = malloc(n * sizeof(int));
    if (!s->wait || !s->bq || !s->aq || !s->active || !s->running || !s->busy || !s->sent || !s->vtime || !s->vlast ||
        !s->gen || !s->lastlane || !s->theads || !s->need || !s->start || !s->end || !s->comm_rel || !s->other_rel || !s->by_comm ||
        !s->remaining || !s->node_lead || !s->scratch_roots)
        return -1;
    for (int i = 0; i < n; i++) {
        s->start[i] = s->end[i] = NAN;
        s->comm_rel[i] = s->other_rel[i] = -1.0;
    }
    for (int d = 0; d < nd; d++) s->theads[d].kind = -1, s->theads[d].t = INFINITY;
    return 0;
}

void sim_reset(Sim *s) {
    /* Back to the state after sim_init, keeping the allocations (the batch runs many points). */
    int nd = s->nd, n = s->g.n > 0 ? s->g.n : 1;
    for (int d = 0; d < nd; d++) {
        s->wait[d].head = s->wait[d].len = 0;
        bq_clear(&s->bq[d]); aq_clear(&s->aq[d]); s->active[d].n = 0;
        if (s->rb) rq_clear(&s->rb[d], &s->ra[d]);
        s->running[d] = 0; s->busy[d] = s->sent[d] = 0.0;
        s->vtime[d] = s->vlast[d] = 0.0; s->gen[d] = 0;
        if (s->fnext) s->fnext[d] = 0;
    }
    for (int r = 0; r < 3; r++) { s->ready[r].n = 0; s->taken[r] = 0; }
    for (int i = 0; i < n; i++) {
        s->need[i] = 0; s->start[i] = s->end[i] = NAN;
        s->comm_rel[i] = s->other_rel[i] = -1.0;
        s->by_comm[i] = 0; s->remaining[i] = 0; s->node_lead[i] = 0;
    }
    s->nev = 0; s->counter = 0; s->nchunks = 0; s->nlog = 0; s->nscratch = 0; s->nroots = 0;
    s->nlag = 0; s->lead = 0; s->in_flight = 0;
    s->nlanes = 0; s->nlive = 0; s->fl.on = 0;
    for (int k = 0; k < s->headcap; k++) s->heads[k].t = INFINITY, s->heads[k].key = ~0ULL;
    for (int d = 0; d < s->nd; d++) s->theads[d].kind = -1, s->theads[d].t = INFINITY;
    s->comm_since = s->comm_ns = s->compute_ns = s->cpu_ns = 0.0;
    s->bytes_sent = 0.0; s->finish = 0.0;
}

void sim_free(Sim *s) {
    if (s->wait) for (int d = 0; d < s->nd; d++) free(s->wait[d].buf);
    if (s->bq) for (int d = 0; d < s->nd; d++) bq_free(&s->bq[d]);
    if (s->aq) for (int d = 0; d < s->nd; d++) aq_free(&s->aq[d]);
    if (s->rb) for (int d = 0; d < s->nd; d++) rq_free(&s->rb[d], &s->ra[d]);
    free(s->rb); free(s->ra); free(s->ownrank);
    if (s->active) for (int d = 0; d < s->nd; d++) free(s->active[d].h);
    for (int r = 0; r < 3; r++) free(s->ready[r].h);
    free(s->wait); free(s->bq); free(s->aq); free(s->active); free(s->running); free(s->busy); free(s->sent);
    free(s->vtime); free(s->vlast); free(s->gen); free(s->need); free(s->start); free(s->end);
    free(s->comm_rel); free(s->other_rel); free(s->by_comm); free(s->remaining); free(s->node_lead);
    free(s->scratch_roots); free(s->ev); free(s->ev2);
    if (s->lanes) for (int k = 0; k < s->lanecap; k++) free(s->lanes[k].buf);
    free(s->lanes); free(s->lastlane); free(s->heads); free(s->theads); free(s->cbase); free(s->clen); free(s->pos); free(s->owner); free(s->prio);
    free(s->started); free(s->chunk_end); free(s->phase_lead); free(s->logv); free(s->scratch);
    free(s->lagseq); free(s->laglead); free(s->fnext); free(s->fat);
    flow_free(&s->fl);
    memset(s, 0, sizeof *s);
}

/* Serve the smallest-first queues by rank: `rank[i]` is phase i's key rank among its dim's
 * distinct keys, each below MAX_RANKS (the caller checks). Before the run; 0 or -1 (no memory). */
static int sim_use_ranks(Sim *s, const int *rank) {
    if (s->qmode != QM_BUCKETS && s->qmode != QM_ASTRA) return 0;
    if (!s->rb) {
        s->rb = calloc((size_t)s->nd, sizeof(RBuckets));
        s->ra = calloc((size_t)s->nd, sizeof(RAstra));
        if (!s->rb || !s->ra) { free(s->rb); free(s->ra); s->rb = NULL; s->ra = NULL; return -1; }
        for (int d = 0; d < s->nd; d++) {
            s->rb[d].r = calloc(MAX_RANKS, sizeof(Ring));
            s->ra[d].runs = calloc(MAX_RANKS, sizeof(Ring));
            if (!s->rb[d].r || !s->ra[d].runs) return -1;
            rq_clear(&s->rb[d], &s->ra[d]);
        }
    }
    s->ph.rank = rank;
    s->qmode = s->qmode == QM_BUCKETS ? QM_RANKED_DSE : QM_RANKED_ASTRA;
    return 0;
}

static int by_value(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b ? 1 : 0;
}

/* Rank each phase's key among its dim's distinct keys and serve the smallest-first queues by rank
 * (sim_use_ranks) if no dim has more than MAX_RANKS; once every phase is known, before the first
 * enqueue. 0, or -1 (no memory). */
int rank_phases(const int *dim, const double *key, Py_ssize_t n, int nd, int *rank) {
    double *keys = malloc((size_t)(n ? n : 1) * sizeof(double));
    if (!keys) return -1;
    int ok = 1;
    for (int d = 0; d < nd && ok; d++) {
        Py_ssize_t m = 0, u = 0;
        for (Py_ssize_t i = 0; i < n; i++) if (dim[i] == d) keys[m++] = key[i];
        qsort(keys, (size_t)m, sizeof(double), by_value);
        for (Py_ssize_t i = 0; i < m; i++) if (u == 0 || keys[i] != keys[u - 1]) keys[u++] = keys[i];
        ok = u <= MAX_RANKS;
        for (Py_ssize_t i = 0; i < n && ok; i++) {
            if (dim[i] != d) continue;
            int lo = 0, hi = (int)u;  /* the key's place among the distinct ones */
            while (lo < hi) { int mid = (lo + hi) / 2; if (keys[mid] < key[i]) lo = mid + 1; else hi = mid; }
            rank[i] = lo;
        }
    }
    free(keys);
    return ok;
}

int sim_rank_keys(Sim *s) {
    Py_ssize_t n = s->ph.len;
    if ((s->qmode != QM_BUCKETS && s->qmode != QM_ASTRA) || n == 0) return 0;
    int *rank = malloc((size_t)n * sizeof(int));
    if (!rank) return -1;
    int ok = rank_phases(s->ph.dim, s->ph.key, n, s->nd, rank);
    if (ok <= 0) { free(rank); return ok; }
    free(s->ownrank);
    s->ownrank = rank;
    return sim_use_ranks(s, rank);
}

int sim_rerank(Sim *s) {
    Py_ssize_t n = s->ph.len;
    int *rank = malloc((size_t)(n ? n : 1) * sizeof(int));
    if (!rank) return -1;
    int ok = rank_phases(s->ph.dim, s->ph.key, n, s->nd, rank);
    if (ok <= 0) { free(rank); return ok < 0 ? -1 : 1; }
    free(s->ownrank);
    s->ownrank = rank;
    s->ph.rank = rank;
    return 0;
}

/* The one-node graph of a single collective. */
void graph_single(Graph *g) {
    static const int kinds[1] = {N_COMM}, res[1] = {NET}, sdst[1] = {0};
    static const double zero[1] = {0.0};
    static const Py_ssize_t soff[2] = {0, 0};
    memset(g, 0, sizeof *g);
    g->n = 1; g->kinds = kinds; g->res = res; g->dur = zero; g->delays = zero;
    g->soff = soff; g->sdst = sdst; g->slag = zero; g->end = 0;
}
