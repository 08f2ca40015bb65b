/* The set-up of a run of _flow.c's loop (dse/sim/_flow.c): each plan position's record, each dim at
 * rest, and each part of the run's buffers (inboxes, lanes, rings), as large as the run can fill it. */
#include "_engine.h"
#include <math.h>

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

/* The records of plan positions [j0, j0 + len): one chunk's plan, made anew every run (the batch
 * points a Sim at new phases between runs). */
static void fl_records(const Sim *s, Flow *f, Py_ssize_t j0, int len) {
    for (int p = 0; p < len; p++) {
        Py_ssize_t j = j0 + p, i = s->pmap ? s->pmap[j] : j;
        FRec *r = &f->rec[j];
        r->busy = s->ph.busy[i]; r->delay = s->ph.delay[i]; r->sent = s->ph.sent[i];
        r->dim = (unsigned char)s->ph.dim[i]; r->rank = (unsigned char)s->ph.rank[i];
        r->q = (unsigned short)(r->dim * f->nrank + r->rank);
        r->back = s->ph.fifo[i] || len - p - 1 == 1;
        r->last = p == len - 1;
    }
}

/* This run's plans: their records (each plan once), how many chunks run each (mult, by its first
 * position) and the list of them (plan). Their count, or -1. */
static int fl_plans(Sim *s, Flow *f, int nrank) {
    int n = (int)s->nchunks;
    Py_ssize_t npos = 0, np = f->nplan;
    for (int c = 0; c < n; c++) if (s->cbase[c] + s->clen[c] > npos) npos = s->cbase[c] + s->clen[c];
    if (npos > f->nrec) {  /* records, stamps and counts by plan position, grown together */
        Py_ssize_t cap = f->nrec ? f->nrec : 16;
        while (cap < npos) cap *= 2;
        FRec *rec = calloc((size_t)cap, sizeof(FRec));  /* all defined */
        int *stamp = calloc((size_t)cap, sizeof(int)), *mult = calloc((size_t)cap, sizeof(int));
        if (!rec || !stamp || !mult) { free(rec); free(stamp); free(mult); return -1; }
        free(f->rec); free(f->stamp); free(f->mult);
        f->rec = rec; f->stamp = stamp; f->mult = mult; f->nrec = cap; f->run = 0;
    }
    if (room((void **)&f->plan, &np, n, sizeof(int))) return -1;
    f->nplan = (int)np;
    f->nrank = nrank;
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

/* Each dim at rest with an empty inbox, and each part of the run's buffers as large as this run's
 * plans can fill it: each dim's run (every arrival at the dim, between two sentinels), each lane
 * (every arrival from its dim after a delay) and each ring (every phase of its dim and rank). */
static int fl_parts(Sim *s, Flow *f, int nplans) {
    int nd = s->nd, nl = f->nl, nq = s->qmode == QM_RANKED_DSE ? nd * f->nrank : 0;
    Py_ssize_t cd = f->ndm, cq = f->nrg, cl = f->nlncap, nb = 0, off = 0;
    if (room((void **)&f->dm, &cd, nd, sizeof(FDim)) || room((void **)&f->rg, &cq, nq + 1, sizeof(FRing)) ||
        room((void **)&f->ln, &cl, (Py_ssize_t)nd * nl + 1, sizeof(FLane)))
        return -1;
    f->ndm = (int)cd; f->nrg = (int)cq; f->nlncap = cl;
    memset(f->dm, 0, (size_t)nd * sizeof(FDim));
    memset(f->rg, 0, (size_t)nq * sizeof(FRing));
    memset(f->ln, 0, (size_t)nd * nl * sizeof(FLane));
    for (int i = 0; i < nplans; i++) {  /* counts */
        int c = f->plan[i], len = s->clen[c], m = f->mult[s->cbase[c]];
        const FRec *r = &f->rec[s->cbase[c]];
        for (int p = 0; p < len; p++) {
            if (p) f->dm[r[p].dim].it += m;
            if (nq) f->rg[r[p].q].h += m;
            if (nl && p + 1 < len && r[p].delay != 0.0) f->ln[r[p + 1].dim * nl + r[p].dim].e += m;
        }
    }
    for (int q = 0; q < nq; q++) { int cnt = f->rg[q].h; f->rg[q].h = f->rg[q].t = (int)nb; nb += cnt; }
    if (room((void **)&f->qb, &f->nqb, nb + 1, sizeof(int))) return -1;
    for (int d = 0; d < nd; d++) off += f->dm[d].it + 2;
    for (int k = 0; k < nd * nl; k++) off += f->ln[k].e;
    if (room((void **)&f->ib, &f->nib, off, sizeof(FItem))) return -1;
    off = 0;
    for (int d = 0; d < nd; d++) {
        FDim *D = &f->dm[d];
        int cnt = D->it;
        f->ib[off].t = 0.0; f->ib[off].k = 0;                     /* FRONT */
        f->ib[off + 1].t = INFINITY; f->ib[off + 1].k = ~0ULL;  /* BACK */
        D->ih = D->it = (int)off + 1;
        off += cnt + 2;
        D->item = -1; D->t = INFINITY; D->k = ~0ULL; D->ml = -1;
        D->busy = s->busy[d]; D->sent = s->sent[d]; D->cand = -1; D->crank = MAX_RANKS;
    }
    for (int k = 0; k < nd * nl; k++) {
        FLane *L = &f->ln[k];
        L->h = (int)off; off += L->e; L->e = L->h;
        L->t = INFINITY; L->k = ~0ULL;
    }
    return 0;
}

/* A run's set-up, before its chunks are issued: records, dims at rest, parts. 0 or -1. */
int flow_setup(Sim *s) {
    Flow *f = &s->fl;
    int top = 0;
    for (Py_ssize_t i = 0; i < s->ph.len; i++) if (s->ph.rank[i] > top) top = s->ph.rank[i];
    f->nl = s->nd <= FLOW_LANES ? s->nd : 0;
    int nplans = fl_plans(s, f, top + 1);
    if (nplans < 0 || fl_parts(s, f, nplans)) return -1;
    f->nd = s->nd; f->ctr = 0; f->left = (int)s->nchunks; f->on = 1; f->bytes = s->bytes_sent; f->finish = s->finish;
    return 0;
}

void flow_free(Flow *f) {
    free(f->dm); free(f->ib); free(f->qb); free(f->rg); free(f->rec); free(f->stamp); free(f->mult);
    free(f->plan); free(f->ln);
    memset(f, 0, sizeof *f);
}
