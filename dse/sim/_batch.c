/* Many points of one shape in one call (dse.sim.batch, dse.sim.tables), the GIL released: per point, the
 * phase costs (from the cost model's kernel, dse/sim/_kernels.c, or given), the Themis orders (the
 * paper's load tracker or ASTRA-sim's OfflineGreedy, exactly as dse/schedulers/themis.py computes
 * them), then the engine (dse/sim/_engine.c) on the shape's plan slots.
 *
 * batch_table(table) -> a capsule holding the parsed table; batch_run(capsule, points, outputs)
 *   table: (ints, combo_dim, combo_key, combo_sent, combo_fifo, combo_tied, plan_off, plan_combo,
 *           slot_of, chunk_sc, chunk_cc, fixed, perm, permcode, thr_idx, ch_off, ch_idx, ch_dim, ch_fac,
 *           dim_steps, dim_p, greedy_r, combo_kind, combo_c, dim_algo, dim_switch, chk_num, chk_dim,
 *           dim_kind, dim_links, dim_nic, dim_router)
 *          ints = (nd, nchunks, ncombo, norder, nsc, ncc, nchk, tracker, kernel, policy, slots, shared,
 *                  dimkey, base, seed_latency, highest_first, ag, serialized, endpoint_ns)
 *   points: (npoints, bw, lat, busy, delay, ties, bwt, gbw): per point rows (empty where unused)
 *   outputs: (time, dim_busy, dim_bytes, orders) writable buffers (orders may be empty)
 * All three are parsed and checked in dse/sim/_validate.c before anything runs (every index in range,
 * every count consistent, every cost finite): a bad table or row is a ValueError, never a crash.
 */
#include "_batch.h"
#include <math.h>

#define MIB 1048576.0

/* ----- Themis: the paper's load tracker (ThemisScheduler.track) --------------------------------- */
static int order_id(const Table *tb, const int *o) {
    int code = 0, m = 1;
    for (int i = 0; i < tb->nd; i++) { code += o[i] * m; m *= tb->nd; }
    return tb->permcode[code];
}

/* Per (order, charge class) slot, what a chunk charges each dim, when each slot charges every dim
 * once (the tracker's charges then: one add per dim; `inc` made for a slot on its first use in a
 * point, `seen` stamped with the point). NULL inc: the charges one by one. */
typedef struct { double *inc; unsigned *seen; unsigned point; } Charges;

static void load_tracker(const Table *tb, const double *lat, const double *bwt, int *oids, Charges *ch) {
    int nd = tb->nd, o[8];
    double loads[8];
    if (ch->inc && ++ch->point == 0) {  /* the stamps wrapped: none is this point's */
        memset(ch->seen, 0, (size_t)tb->norder * (size_t)tb->ncc * sizeof(unsigned));
        ch->point = 1;
    }
    unsigned point = ch->point;
    for (int d = 0; d < nd; d++) loads[d] = tb->seed_latency ? (double)tb->dim_steps[d] * lat[d] : 0.0;
    for (int k = 0; k < tb->nchunks; k++) {
        int cc = tb->chunk_cc[k], idx = 0;
        double lo = loads[0], hi = loads[0];
        for (int d = 1; d < nd; d++) {
            if (loads[d] < lo) { lo = loads[d]; idx = d; }
            if (loads[d] > hi) hi = loads[d];
        }
        int oid;
        if (hi - lo < bwt[tb->thr_idx[cc * nd + idx]]) oid = tb->base;
        else {  /* a stable sort by load (highest first for a standalone all-gather) */
            for (int i = 0; i < nd; i++) {
                int x = i, j = i;
                while (j > 0 && (tb->highest_first ? loads[o[j - 1]] < loads[x] : loads[o[j - 1]] > loads[x])) {
                    o[j] = o[j - 1];
                    j--;
                }
                o[j] = x;
            }
            oid = order_id(tb, o);
        }
        oids[k] = oid;
        int slot = oid * tb->ncc + cc;
        if (!ch->inc) {
            for (int j = tb->ch_off[slot]; j < tb->ch_off[slot + 1]; j++) loads[tb->ch_dim[j]] += tb->ch_fac[j] * bwt[tb->ch_idx[j]];
            continue;
        }
        double *inc = ch->inc + (Py_ssize_t)slot * nd;
        if (ch->seen[slot] != point) {
            ch->seen[slot] = point;
            for (int j = tb->ch_off[slot]; j < tb->ch_off[slot + 1]; j++) inc[tb->ch_dim[j]] = tb->ch_fac[j] * bwt[tb->ch_idx[j]];
        }
        for (int d = 0; d < nd; d++) loads[d] += inc[d];
    }
}

/* Does every slot charge every dim once (Charges)? */
static int charges_dense(const Table *tb) {
    for (int slot = 0; slot < tb->norder * tb->ncc; slot++) {
        unsigned seen = 0;
        if (tb->ch_off[slot + 1] - tb->ch_off[slot] != tb->nd) return 0;
        for (int j = tb->ch_off[slot]; j < tb->ch_off[slot + 1]; j++) seen |= 1u << tb->ch_dim[j];
        if (seen != (1u << tb->nd) - 1) return 0;
    }
    return 1;
}

/* ----- Themis: ASTRA-sim's OfflineGreedy (themis.OfflineGreedy.order), quirks included ---------- */
#ifdef __SIZEOF_INT128__
typedef __int128 big;
#define HAVE_BIG 1
#else
typedef long long big;
#define HAVE_BIG 0
#endif

/* Charges by position: position i gets dims[i]'s volume (0 where skipped), c evolving. */
static void greedy_charge(const Table *tb, const double *bw, const int *dims, long long r, const int *skip, double *out) {
    if (!tb->ag) {  /* the bytes only shrink: 64 bits hold them, and divide faster than 128 */
        long long c = r;
        for (int i = 0; i < tb->nd; i++) {
            int d = dims[i];
            if (skip[i]) { out[i] = 0.0; continue; }
            long long p = tb->dim_p[d];
            out[i] = ((double)c / MIB * ((double)(p - 1) / (double)p)) / (bw[d] / bw[0]);
            c = c / p;
        }
        return;
    }
    big c = r;
    for (int i = 0; i < tb->nd; i++) {
        int d = dims[i];
        if (skip[i]) { out[i] = 0.0; continue; }
        long long p = tb->dim_p[d];
        double rel = bw[d] / bw[0];
        if (tb->ag) { out[i] = ((double)c / MIB * (double)(p - 1)) / rel; c = c * p; }
        else { out[i] = ((double)c / MIB * ((double)(p - 1) / (double)p)) / rel; c = c / p; }
    }
}

static void offline_greedy(const Table *tb, const double *bw, int *oids) {
    int nd = tb->nd, dim[8], off[8], o[8], skip[8];
    double load[8], ch[8];
    for (int d = 0; d < nd; d++) { dim[d] = d; load[d] = 0.0; }
    double b0 = bw[0];
    for (int k = 0; k < tb->nchunks; k++) {
        long long r = tb->greedy_r[k];
        for (int i = 1; i < nd; i++) {  /* stable sort of (dim, load) by load */
            int xd = dim[i]; double xl = load[i]; int j = i;
            while (j > 0 && load[j - 1] > xl) { dim[j] = dim[j - 1]; load[j] = load[j - 1]; j--; }
            dim[j] = xd; load[j] = xl;
        }
        if (tb->ag) for (int i = 0; i < nd / 2; i++) {
            int td = dim[i]; dim[i] = dim[nd - 1 - i]; dim[nd - 1 - i] = td;
            double tl = load[i]; load[i] = load[nd - 1 - i]; load[nd - 1 - i] = tl;
        }
        int ptr = nd;
        for (int i = 0; i < nd; i++) { off[i] = tb->dim_p[dim[i]] == 1; if (!off[i] && ptr == nd) ptr = i; }
        int identity = 0;
        if (ptr < nd) {
            big gap;
            if (tb->ag) {
                int last = nd - 1;
                while (off[last]) last--;
                int dl = dim[last];
                gap = (big)((fabs(load[last] - load[ptr]) * (bw[dl] / b0)) / (double)(tb->dim_p[dl] - 1) * MIB);
                for (int j = last - 1; j >= ptr; j--) if (!off[j]) gap /= tb->dim_p[dim[j]];
            } else {
                int df = dim[ptr];
                long long p = tb->dim_p[df];
                gap = (big)((fabs(load[nd - 1] - load[ptr]) * (bw[df] / b0)) / ((double)(p - 1) / (double)p) * MIB);
            }
            identity = gap < (big)(r / 16);
        }
        if (identity) {  /* back to dim order (reversed for an all-gather: position i is dim nd-1-i) */
            double byd[8];
            for (int i = 0; i < nd; i++) byd[dim[i]] = load[i];
            for (int i = 0; i < nd; i++) { o[i] = i; skip[i] = tb->dim_p[i] == 1; }
            for (int i = 0; i < nd; i++) {
                int d = tb->ag ? nd - 1 - i : i;
                dim[i] = d; load[i] = byd[d];
            }
            greedy_charge(tb, bw, o, r, skip, ch);
            for (int i = 0; i < nd; i++) load[i] += ch[i];
        } else {
            for (int i = 0; i < nd; i++) o[i] = dim[i];
            greedy_charge(tb, bw, o, r, off, ch);
            for (int i = 0; i < nd; i++) load[i] += ch[i];
        }
        oids[k] = order_id(tb, o);
    }
}

/* ----- the batch ------------------------------------------------------------------------------ */
typedef struct { const int *ids; int n; } BatchCtx;

static int issue_batch(Sim *s, int i, double t) {
    (void)t;
    BatchCtx *bx = s->ctx;
    return sim_add_chunks(s, bx->ids, bx->n, i, 0);
}

/* The orders of point p into oids (gbw: the kernel's greedy bandwidths, unless the point gives them);
 * 0, or -1 when this build cannot (no 128-bit integers). */
static int point_orders(const Table *tb, const Points *pt, Py_ssize_t p, const double *bwt, const double *gbw,
                        int *oids, Charges *ch) {
    if (tb->tracker == NO_TRACKER) {
        memcpy(oids, tb->fixed, (size_t)tb->nchunks * sizeof(int));
    } else if (tb->tracker == LOAD_TRACKER) {
        load_tracker(tb, pt->lat ? pt->lat + p * tb->nd : NULL, bwt, oids, ch);
    } else {
        if (!HAVE_BIG) return -1;
        offline_greedy(tb, pt->gbw ? pt->gbw + p * tb->nd : gbw, oids);
    }
    return 0;
}

/* What running points needs besides the table: the engine and its per-point rows (kept by the
 * table's capsule between calls, or made for one call when another thread holds them). */
typedef struct {
    Sim s; int ready;
    double *busy, *delay, *t123, *bwt; unsigned char *tied; int *oids, *ids; Py_ssize_t *poff;
    double last_bw[8], last_lat[8], gbw[8]; int have_last;  /* the costs above are those of these rows */
    Charges ch;
} Work;

static void work_free(Work *w) {
    if (w->ready) {
        w->s.ph.dim = NULL;  /* borrowed from the table */
        w->s.poff = NULL;
        sim_free(&w->s);
    }
    free(w->busy); free(w->delay); free(w->t123); free(w->tied); free(w->bwt); free(w->oids); free(w->ids);
    free(w->poff); free(w->ch.inc); free(w->ch.seen);
    memset(w, 0, sizeof *w);
}

static int work_init(Work *w, const Table *tb) {
    int nd = tb->nd, nc = tb->ncombo;
    memset(w, 0, sizeof *w);
    if (sim_init(&w->s, nd, tb->policy, tb->slots, tb->shared, tb->dimkey, 0, 0, 0, 1)) { sim_free(&w->s); return -1; }
    w->ready = 1;
    w->s.notie = !tb->dimkey;
    for (int k = 0; k < nc; k++) if (tb->combo_tied[k]) w->s.notie = 0;
    w->busy = malloc((size_t)nc * sizeof(double)); w->delay = malloc((size_t)nc * sizeof(double));
    w->t123 = calloc((size_t)nc * 3, sizeof(double)); w->tied = malloc((size_t)nc);
    w->bwt = malloc((size_t)(tb->nchk + 1) * sizeof(double));
    w->oids = malloc((size_t)tb->nchunks * sizeof(int)); w->ids = malloc((size_t)tb->nchunks * sizeof(int));
    Py_ssize_t npo = (Py_ssize_t)tb->norder * tb->nsc;
    w->poff = malloc((size_t)(npo + 1) * sizeof(Py_ssize_t));
    if (!w->busy || !w->delay || !w->t123 || !w->tied || !w->bwt || !w->oids || !w->ids || !w->poff) { work_free(w); return -1; }
    for (Py_ssize_t k = 0; k <= npo; k++) w->poff[k] = tb->plan_off[k];
    if (tb->tracker == LOAD_TRACKER && charges_dense(tb)) {
        Py_ssize_t nslot = (Py_ssize_t)tb->norder * tb->ncc;
        w->ch.inc = malloc((size_t)(nslot * nd) * sizeof(double));
        w->ch.seen = calloc((size_t)nslot, sizeof(unsigned));
        if (!w->ch.inc || !w->ch.seen) { work_free(w); return -1; }
    }
    for (int k = 0; k < nc; k++) w->tied[k] = (unsigned char)tb->combo_tied[k];
    Sim *s = &w->s;
    graph_single(&s->g);
    s->ph.dim = (int *)tb->combo_dim; s->ph.key = (double *)tb->combo_key; s->ph.sent = (double *)tb->combo_sent;
    s->ph.fifo = (unsigned char *)tb->combo_fifo; s->ph.hastie = w->tied; s->ph.busy = w->busy; s->ph.delay = w->delay;
    s->ph.t1 = w->t123; s->ph.t2 = w->t123 + nc; s->ph.t3 = w->t123 + 2 * nc;
    s->poff = w->poff; s->pmap = tb->plan_combo;
    s->ph.len = nc;
    return sim_rank_keys(s);
}


static int run_points(const Table *tb, const Points *pt, Outs *out, Work *w) {
    int nd = tb->nd, nc = tb->ncombo;
    Sim *s = &w->s;
    BatchCtx bx; bx.ids = w->ids; bx.n = tb->nchunks;
    double *gbw = w->gbw;
    for (Py_ssize_t p = 0; p < pt->np; p++) {
        const double *bwtp = w->bwt;
        if (tb->kernel != K_NONE) {
            const double *bw = pt->bw + p * nd, *lat = pt->lat + p * nd;
            size_t row = (size_t)nd * sizeof(double);
            if (!w->have_last || memcmp(bw, w->last_bw, row) || memcmp(lat, w->last_lat, row)) {  /* else: kept */
                w->have_last = 0;
                if (costs(tb, bw, lat, w->busy, w->delay, w->t123, tb->tracker == LOAD_TRACKER ? w->bwt : NULL, gbw))
                    return -4;
                memcpy(w->last_bw, bw, row); memcpy(w->last_lat, lat, row);
                w->have_last = 1;
            }
        } else {
            w->have_last = 0;
            memcpy(w->busy, pt->busy + p * nc, (size_t)nc * sizeof(double));
            memcpy(w->delay, pt->delay + p * nc, (size_t)nc * sizeof(double));
            if (pt->ties) for (int k = 0; k < nc; k++) {
                w->t123[k] = pt->ties[(p * nc + k) * 3]; w->t123[nc + k] = pt->ties[(p * nc + k) * 3 + 1];
                w->t123[2 * nc + k] = pt->ties[(p * nc + k) * 3 + 2];
            }
            if (pt->bwt) bwtp = pt->bwt + p * tb->nchk;
        }
        if (point_orders(tb, pt, p, bwtp, gbw, w->oids, &w->ch)) return -3;
        for (int k = 0; k < tb->nchunks; k++) w->ids[k] = tb->slot_of[w->oids[k] * tb->nsc + tb->chunk_sc[k]];
        sim_reset(s);
        s->ctx = &bx; s->issue_cb = issue_batch; s->resumed_cb = NULL;
        int r = sim_go(s);
        if (r) return r == -2 ? -2 : -1;
        out->time[p] = s->finish;
        memcpy(out->busy + p * nd, s->busy, (size_t)nd * sizeof(double));
        memcpy(out->bytes + p * nd, s->sent, (size_t)nd * sizeof(double));
        if (out->orders) memcpy(out->orders + p * tb->nchunks, w->oids, (size_t)tb->nchunks * sizeof(int));
    }
    return 0;
}

/* A parsed table kept across calls (batch_table): its buffers stay held until the capsule dies. */
typedef struct { Table tb; Bufs bs; Work w; int in_use; } Held;

static void held_free(PyObject *cap) {
    Held *h = PyCapsule_GetPointer(cap, "dse.batch_table");
    if (h) { work_free(&h->w); bufs_release(&h->bs); free(h); }
}

PyObject *batch_table(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *table;
    if (!PyArg_ParseTuple(args, "O!", &PyTuple_Type, &table)) return NULL;
    Held *h = calloc(1, sizeof(Held));
    if (!h) return PyErr_NoMemory();
    if (parse_table(table, &h->tb, &h->bs)) { bufs_release(&h->bs); free(h); return NULL; }
    PyObject *cap = PyCapsule_New(h, "dse.batch_table", held_free);
    if (!cap) { bufs_release(&h->bs); free(h); }
    return cap;
}

PyObject *batch_run(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *table, *points, *outputs;
    if (!PyArg_ParseTuple(args, "OO!O!", &table, &PyTuple_Type, &points, &PyTuple_Type, &outputs))
        return NULL;
    Held *h = PyCapsule_GetPointer(table, "dse.batch_table");
    if (!h) return NULL;
    Table tb = h->tb;
    Points pt;
    Outs out;
    Bufs bs;
    bs.n = 0;
    if (parse_points(points, &tb, &pt, &bs) || parse_outputs(outputs, &tb, &pt, &out, &bs)) {
        bufs_release(&bs);
        return NULL;
    }
    Work own, *w = &h->w;
    int mine = h->in_use;  /* another thread runs this table: a workspace of our own */
    if (mine) w = &own;
    if ((mine || !w->ready) && work_init(w, &tb)) { work_free(w); bufs_release(&bs); return PyErr_NoMemory(); }
    if (!mine) h->in_use = 1;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = run_points(&tb, &pt, &out, w);
    Py_END_ALLOW_THREADS
    if (mine) work_free(&own); else h->in_use = 0;
    bufs_release(&bs);
    if (rc == -4) { PyErr_SetString(PyExc_OverflowError, "a point beyond the cost kernel's integers or steps"); return NULL; }
    if (rc == -3) { PyErr_SetString(PyExc_NotImplementedError, "OfflineGreedy needs 128-bit integers"); return NULL; }
    if (rc == -2) { PyErr_SetString(PyExc_RuntimeError, "engine stalled"); return NULL; }
    if (rc) return PyErr_NoMemory();
    Py_RETURN_NONE;
}
