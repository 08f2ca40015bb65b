/* Many points of one shape in one call (dse.sim.compiled), the GIL released: per point, what its (size,
 * chunks) makes of the shape (_derive.c, kept while they repeat), the phase costs from the cost model's
 * kernel (_kernels.c, kept while the bandwidths and latencies repeat), the Themis orders (_trackers.c),
 * then the engine (dse/sim/_engine.c) on the derived plans.
 *
 * batch_table(fields) -> a capsule holding the parsed shape (a dict by name: _shape.c; batch_table()
 *   returns the names); batch_run(capsule, points, outputs) -> None:
 *   points: (npoints, size q, chunks q, bw d, lat d, order_off q): per point rows; orders of point p go
 *           to outputs' orders[order_off[p] ..], which must hold 2 * chunks + 2 ids;
 *   outputs: (time d, dim_busy d, dim_bytes d, nchunks i, orders i) writable buffers.
 * Errors: ValueError (bad input, nothing run), OverflowError (args (point, why): a point beyond the
 * kernel's exact range: run it in Python; the points before it are done), IndexError (more chunks than a scheduler's prefix of orders: args (point, chunks)),
 * NotImplementedError (OfflineGreedy without 128-bit integers), RuntimeError (the engine stalled).
 */
#include "_batch.h"
#include "_trackers.h"
#include <limits.h>

PyObject *point_costs(const Shape *sh, const Derived *dv, const double *bw, const double *lat);  /* _kernels.c */

typedef struct { const int *ids; int n; } BatchCtx;

static int issue_batch(Sim *s, int i, double t) {
    (void)t;
    BatchCtx *bx = s->ctx;
    return sim_add_chunks(s, bx->ids, bx->n, i, 0);
}

/* What running points needs besides the shape: the derived plans, the engine and per-point rows (kept
 * by the capsule between calls, or made for one call when another thread holds them). */
typedef struct {
    Derived dv; Sim s; int ready;
    double *busy, *delay, *t123; int *oids, *ids; Py_ssize_t *poff; int cap;
    double last_bw[MAX_ND], last_lat[MAX_ND], gbw[MAX_ND]; int have_last;  /* the costs are these rows' */
    Charges ch;
} Work;

static void sim_drop(Work *w) {
    if (!w->ready) return;
    memset(&w->s.ph, 0, sizeof w->s.ph);  /* borrowed from the derived plans */
    w->s.poff = NULL; w->s.pmap = NULL;
    sim_free(&w->s);
    w->ready = 0;
}

static void work_free(Work *w) {
    sim_drop(w);
    derived_free(&w->dv);
    free(w->busy); free(w->delay); free(w->t123); free(w->oids); free(w->ids); free(w->poff);
    free(w->ch.inc); free(w->ch.seen);
    memset(w, 0, sizeof *w);
    w->dv.size = -1;
}

static int work_init(Work *w, const Shape *sh) {
    memset(w, 0, sizeof *w);
    w->dv.size = -1;
    if (sh->tracker != LOAD_TRACKER) return 0;
    w->ch.inc = malloc((size_t)sh->norder * (size_t)sh->nd * sizeof(double));
    w->ch.seen = calloc((size_t)sh->norder, sizeof(unsigned));
    return w->ch.inc && w->ch.seen ? 0 : -1;
}

/* Room for the derived plans' costs and chunks. */
static int work_room(Work *w) {
    const Derived *d = &w->dv;
    int need = d->ncombo > d->nchunks ? d->ncombo : d->nchunks;
    if (need <= w->cap) return 0;
    int c = 2 * need;
    free(w->busy); free(w->delay); free(w->t123); free(w->oids); free(w->ids);
    w->busy = malloc((size_t)c * sizeof(double)); w->delay = malloc((size_t)c * sizeof(double));
    w->t123 = calloc((size_t)c * 3, sizeof(double));
    w->oids = malloc((size_t)c * sizeof(int)); w->ids = malloc((size_t)c * sizeof(int));
    w->cap = w->busy && w->delay && w->t123 && w->oids && w->ids ? c : 0;
    return w->cap ? 0 : -1;
}

/* Point the Sim's phases at the derived combos and the Work's costs. */
static void sim_point(Work *w) {
    const Derived *d = &w->dv;
    Sim *s = &w->s;
    int nc = d->ncombo;
    s->ph.dim = d->combo_dim; s->ph.key = d->combo_key; s->ph.sent = d->combo_sent;
    s->ph.fifo = d->combo_fifo; s->ph.hastie = d->combo_tied; s->ph.busy = w->busy; s->ph.delay = w->delay;
    s->ph.t1 = w->t123; s->ph.t2 = w->t123 + nc; s->ph.t3 = w->t123 + 2 * nc;
    s->poff = w->poff; s->pmap = d->plan_combo;
    s->ph.len = nc;
}

/* The engine on the derived plans. A Sim serving FIFO, or ranked queues whose new ranks fit, is kept
 * (its phases pointed at the new combos); else a fresh one, ranked by sim_rank_keys. */
static int sim_on_derived(Work *w, const Shape *sh) {
    const Derived *d = &w->dv;
    int nplan = sh->norder * d->nsc;
    free(w->poff);
    w->poff = malloc((size_t)(nplan + 1) * sizeof(Py_ssize_t));
    if (!w->poff || work_room(w)) return -1;
    for (int k = 0; k <= nplan; k++) w->poff[k] = d->plan_off[k];
    w->have_last = 0;
    Sim *s = &w->s;
    if (w->ready && (sh->policy == FIFO || s->ph.rank)) {
        sim_point(w);
        int rc = s->ph.rank ? sim_rerank(s) : 0;
        if (rc <= 0) return rc;
    }
    sim_drop(w);
    if (sim_init(s, sh->nd, sh->policy, sh->slots, sh->shared, sh->dimkey, 0, 0, 0, 1)) { w->ready = 1; return -1; }
    w->ready = 1;
    s->notie = !sh->dimkey && !sh->tied;
    graph_single(&s->g);
    sim_point(w);
    return sim_rank_keys(s);
}

/* Point p's plans and costs: derived anew when its (size, chunks) differ from the last, costed anew when
 * they or its rows differ. 0 or an error code (_derive.c's, or -4 from the kernel). */
static int point_ready(Work *w, const Shape *sh, const Points *pt, Py_ssize_t p) {
    int nd = sh->nd;
    const double *bw = pt->bw + p * nd, *lat = pt->lat + p * nd;
    if (w->dv.size != pt->size[p] || w->dv.chunks != pt->chunks[p] || !w->ready) {
        int rc = derive(sh, &w->dv, pt->size[p], pt->chunks[p]);
        if (rc) return rc;
        if (sim_on_derived(w, sh)) return -1;
    }
    size_t row = (size_t)nd * sizeof(double);
    if (w->have_last && !memcmp(bw, w->last_bw, row) && !memcmp(lat, w->last_lat, row)) return 0;
    w->have_last = 0;
    int rc = costs(sh, &w->dv, bw, lat, w->busy, w->delay, w->t123, w->gbw);
    if (rc) return rc;
    memcpy(w->last_bw, bw, row); memcpy(w->last_lat, lat, row);
    w->have_last = 1;
    return 0;
}

static int point_orders(Work *w, const Shape *sh, const Points *pt, Py_ssize_t p) {
    const Derived *d = &w->dv;
    if (sh->tracker == NO_TRACKER) memcpy(w->oids, sh->prefix, (size_t)d->nchunks * sizeof(int));
    else if (sh->tracker == LOAD_TRACKER) load_tracker(sh, d, pt->bw + p * sh->nd, pt->lat + p * sh->nd, w->oids, &w->ch);
    else if (!HAVE_BIG) return -3;
    else offline_greedy(sh, d, w->gbw, w->oids);
    for (int k = 0; k < d->nchunks; k++) w->ids[k] = w->oids[k] * d->nsc + d->chunk_sc[k];
    return 0;
}

/* Every point; 0 or an error code, *at the point it stopped at. */
static int run_points(const Shape *sh, const Points *pt, Outs *out, Work *w, Py_ssize_t *at) {
    int nd = sh->nd;
    for (Py_ssize_t p = 0; p < pt->np; p++) {
        *at = p;
        int rc = point_ready(w, sh, pt, p);
        if (!rc) rc = point_orders(w, sh, pt, p);
        if (rc) return rc;
        const Derived *d = &w->dv;
        if (pt->order_off[p + 1] - pt->order_off[p] < d->nchunks || pt->order_off[p + 1] > out->norders) return -6;
        BatchCtx bx = {w->ids, d->nchunks};
        Sim *s = &w->s;
        sim_reset(s);
        s->ctx = &bx; s->issue_cb = issue_batch; s->resumed_cb = NULL;
        rc = sim_go(s);
        if (rc) return rc == -2 ? -2 : -1;
        out->time[p] = s->finish;
        memcpy(out->busy + p * nd, s->busy, (size_t)nd * sizeof(double));
        memcpy(out->bytes + p * nd, s->sent, (size_t)nd * sizeof(double));
        out->nch[p] = d->nchunks;
        memcpy(out->orders + pt->order_off[p], w->oids, (size_t)d->nchunks * sizeof(int));
    }
    return 0;
}

PyObject *float_tuple(const double *x, Py_ssize_t n) {
    PyObject *t = PyTuple_New(n);
    for (Py_ssize_t k = 0; t && k < n; k++) {
        PyObject *f = PyFloat_FromDouble(x[k]);
        if (!f) { Py_DECREF(t); return NULL; }
        PyTuple_SET_ITEM(t, k, f);
    }
    return t;
}

static PyObject *int_tuple(const int *x, int n) {
    PyObject *t = PyTuple_New(n);
    for (int k = 0; t && k < n; k++) {
        PyObject *i = PyLong_FromLong(x[k]);
        if (!i) { Py_DECREF(t); return NULL; }
        PyTuple_SET_ITEM(t, k, i);
    }
    return t;
}

/* A parsed shape kept across calls: its buffers stay held until the capsule dies. */
typedef struct { Shape sh; Bufs bs; Work w; int in_use; } Held;

static void held_free(PyObject *cap) {
    Held *h = PyCapsule_GetPointer(cap, "dse.batch_table");
    if (h) { work_free(&h->w); bufs_release(&h->bs); free(h); }
}

PyObject *batch_table(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *fields = NULL;
    if (!PyArg_ParseTuple(args, "|O", &fields)) return NULL;
    if (!fields) return shape_field_names();
    Held *h = calloc(1, sizeof(Held));
    if (!h) return PyErr_NoMemory();
    if (parse_shape(fields, &h->sh, &h->bs)) { bufs_release(&h->bs); free(h); return NULL; }
    if (work_init(&h->w, &h->sh)) { work_free(&h->w); bufs_release(&h->bs); free(h); return PyErr_NoMemory(); }
    PyObject *cap = PyCapsule_New(h, "dse.batch_table", held_free);
    if (!cap) { work_free(&h->w); bufs_release(&h->bs); free(h); }
    return cap;
}

static PyObject *run_error(int rc, const Work *w, Py_ssize_t at) {
    if (rc == -4) PyErr_SetObject(PyExc_OverflowError, Py_BuildValue("(ns)", at, "a point beyond the cost kernel's exact integers or steps"));
    else if (rc == -5) PyErr_SetObject(PyExc_IndexError, Py_BuildValue("(ni)", at, w->dv.nchunks));
    else if (rc == -6) PyErr_SetString(PyExc_ValueError, "points' order offsets leave a point less than its chunks");
    else if (rc == -3) PyErr_SetString(PyExc_NotImplementedError, "OfflineGreedy needs 128-bit integers");
    else if (rc == -2) PyErr_SetString(PyExc_RuntimeError, "engine stalled");
    else PyErr_NoMemory();
    return NULL;
}

PyObject *batch_run(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *table, *points, *outputs;
    if (!PyArg_ParseTuple(args, "OO!O!", &table, &PyTuple_Type, &points, &PyTuple_Type, &outputs)) return NULL;
    Held *h = PyCapsule_GetPointer(table, "dse.batch_table");
    if (!h) return NULL;
    Points pt;
    Outs out;
    Bufs bs;
    bs.n = 0;
    if (parse_points(points, &h->sh, &pt, &bs) || parse_outputs(outputs, &h->sh, &pt, &out, &bs)) {
        bufs_release(&bs);
        return NULL;
    }
    Work own, *w = &h->w;
    int mine = h->in_use;  /* another thread runs this shape: a workspace of our own */
    if (mine && work_init(&own, &h->sh)) { work_free(&own); bufs_release(&bs); return PyErr_NoMemory(); }
    if (mine) w = &own; else h->in_use = 1;
    int rc;
    Py_ssize_t at = 0;
    Py_BEGIN_ALLOW_THREADS
    rc = run_points(&h->sh, &pt, &out, w, &at);
    Py_END_ALLOW_THREADS
    if (rc) run_error(rc, w, at);
    if (rc && rc != -4 && rc != -5) w->dv.size = -1;  /* a failed point leaves nothing to keep */
    if (mine) work_free(&own); else h->in_use = 0;
    bufs_release(&bs);
    if (rc) return NULL;
    Py_RETURN_NONE;
}

/* batch_costs(capsule, size, chunks, bw, lat): one point's combos and costs (the tests'). */
PyObject *batch_costs(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *table, *bwo, *lato;
    long long size, chunks;
    if (!PyArg_ParseTuple(args, "OLLOO", &table, &size, &chunks, &bwo, &lato)) return NULL;
    Held *h = PyCapsule_GetPointer(table, "dse.batch_table");
    if (!h) return NULL;
    if (size < 1 || chunks < 1 || chunks > size) { PyErr_SetString(PyExc_ValueError, "a size and chunks >= 1, chunks <= size"); return NULL; }
    Bufs bs;
    bs.n = 0;
    int nd = h->sh.nd;
    const double *bw = buf_item(&bs, bwo, "bandwidths", "d", nd, 0, NULL), *lat = NULL;
    if (bw) lat = buf_item(&bs, lato, "latencies", "d", nd, 0, NULL);
    PyObject *res = NULL;
    if (bw && lat && !v_rows(bw, lat, nd)) {
        Derived dv;
        memset(&dv, 0, sizeof dv);
        dv.size = -1;
        int rc = derive(&h->sh, &dv, size, chunks);
        if (rc == -1) PyErr_NoMemory();
        else if (rc) PyErr_SetString(PyExc_OverflowError, "a point beyond the cost kernel's exact integers or steps");
        else res = point_costs(&h->sh, &dv, bw, lat);
        derived_free(&dv);
    } else if (!PyErr_Occurred()) {
        PyErr_SetString(PyExc_ValueError, "batch_costs needs nd bandwidths and latencies");
    }
    bufs_release(&bs);
    return res;
}

/* batch_one(capsule, size, chunks, bw, lat) -> (time, busy, bytes, order ids): one point, its rows and
 * results as Python objects (evaluate's call); the errors of batch_run. */
PyObject *batch_one(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *table, *bwo, *lato;
    long long size, chunks, off[2] = {0, 0};
    if (!PyArg_ParseTuple(args, "OLLOO", &table, &size, &chunks, &bwo, &lato)) return NULL;
    Held *h = PyCapsule_GetPointer(table, "dse.batch_table");
    if (!h) return NULL;
    int nd = h->sh.nd;
    if (size < 1 || size > KERNEL_INTS || chunks < 1 || chunks > size || chunks > INT_MAX / 2) {
        PyErr_SetString(PyExc_ValueError, "a size and chunks >= 1, chunks <= size");
        return NULL;
    }
    Bufs bs;
    bs.n = 0;
    const double *bw = buf_item(&bs, bwo, "bandwidths", "d", nd, 0, NULL), *lat = NULL;
    if (bw) lat = buf_item(&bs, lato, "latencies", "d", nd, 0, NULL);
    if (!bw || !lat || v_rows(bw, lat, nd)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "batch_one needs nd bandwidths and latencies");
        bufs_release(&bs);
        return NULL;
    }
    off[1] = 2 * chunks + 2;
    int *orders = malloc((size_t)off[1] * sizeof(int)), nch = 0;
    double time = 0.0, busy[MAX_ND], bytes[MAX_ND];
    Points pt = {1, &size, &chunks, off, bw, lat};
    Outs out = {&time, busy, bytes, &nch, orders, off[1]};
    PyObject *res = NULL;
    if (!orders) { bufs_release(&bs); return PyErr_NoMemory(); }
    Work own, *w = &h->w;
    int mine = h->in_use, rc = 0;
    if (mine && work_init(&own, &h->sh)) rc = -1;
    if (mine) w = &own; else h->in_use = 1;
    Py_ssize_t at = 0;
    if (!rc) rc = run_points(&h->sh, &pt, &out, w, &at);
    if (rc) run_error(rc, w, at);
    else res = Py_BuildValue("(dNNN)", time, float_tuple(busy, nd), float_tuple(bytes, nd), int_tuple(orders, nch));
    if (rc && rc != -4 && rc != -5) w->dv.size = -1;
    if (mine) work_free(&own); else h->in_use = 0;
    free(orders);
    bufs_release(&bs);
    return res;
}
