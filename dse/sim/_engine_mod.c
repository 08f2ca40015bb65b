/* The Python entry of the C engine (module dse.sim._engine): converts phases and graphs, calls back the
 * planner, returns the numbers.
 *
 * run(ndims, policy, slots, shared, dimkey, use_prio, track, record, tieless, plans, graph, hooks[, service_order])
 *   plans: for a single collective (graph None), a list with one tuple of Phase per chunk
 *          (dse.costs.base.Phase: dim, kind, busy, delay, key, sent, fifo_only, tie, lead);
 *          chunks sharing one tuple object share its conversion.
 *   graph: None, or (kinds, resources, durations, delays, succ_offsets, succ_nodes, succ_lags, end,
 *          comm_exclusive, by_id, min_ns, end_before_release, ideal or None), sequences of numbers
 *   hooks: with a graph, an object with issue(node, t, lead) -> (plans, priority) and resumed()
 *   service_order: with policy FIXED_SEQ (3), one sequence of chunk ids >= 0 per dim (else None);
 *          an order not followed to its end raises dse.sim.engine_io.ServiceStall(dim, entry, chunk)
 * returns (finish, dim_busy, dim_bytes, chunk_end, node_start, node_end, compute, cpu, comm,
 *          bytes_sent, log list of (chunk, step, start, end) or None)
 *
 * Everything is checked before the run (a ValueError or TypeError, never a crash; helpers in _validate.c):
 * nd 1 to 65535; a phase's dim in range, busy, delay and bytes finite and >= 0, key and tie offsets
 * finite; a lead map's stride >= 1 and entries NPUs of the dim (0 .. len - 1), stride x len <= 2^40
 * (dse.core.limits.MAX_NPUS: every lead stays an NPU index); a graph a tuple whose kinds, resources,
 * successors and offsets are in range, durations, delays, lags, min_ns and ideal times finite and >= 0;
 * a service order's ids 0 .. 2^31-1. Sequences are read through a tuple this entry holds, so that no
 * item's conversion can free what is being read.
 */
#include "_engine.h"
#include <limits.h>
#include <math.h>

#define MAX_ND 65535             /* dims of one run */
#define MAX_NPUS (1LL << 40)     /* dse.core.limits.MAX_NPUS: a lead map's stride x NPUs */

PyObject *batch_run(PyObject *self, PyObject *args);  /* _batch.c */
PyObject *batch_table(PyObject *self, PyObject *args);
PyObject *batch_costs(PyObject *self, PyObject *args);  /* _kernels.c */

/* ----- phases from Phase tuples --------------------------------------------------------------- */
static double num(PyObject *o, int *err) {
    double v = PyFloat_AsDouble(o);
    if (v == -1.0 && PyErr_Occurred()) *err = 1;
    return v;
}

/* A tuple of o's items (o itself if a tuple): held while its items are read, whatever their conversions do. */
static PyObject *seq_tuple(PyObject *o, const char *what) {
    if (PyTuple_Check(o)) { Py_INCREF(o); return o; }
    if (!PySequence_Check(o) || PyUnicode_Check(o) || PyBytes_Check(o)) { PyErr_SetString(PyExc_TypeError, what); return NULL; }
    return PySequence_Tuple(o);
}

int phases_grow(Phases *f, Py_ssize_t need) {
    if (f->len + need <= f->cap) return 0;
    Py_ssize_t nc = (f->cap + need) * 2;
    void *a;
#define GROW(field, T) a = realloc(f->field, (size_t)nc * sizeof(T)); if (!a) return -1; f->field = a;
    GROW(dim, int) GROW(busy, double) GROW(delay, double) GROW(key, double) GROW(sent, double)
    GROW(t1, double) GROW(t2, double) GROW(t3, double) GROW(fifo, unsigned char) GROW(hastie, unsigned char)
    GROW(lstride, long long) GROW(lp, int) GROW(loff, int)
#undef GROW
    f->cap = nc;
    return 0;
}

void phases_free(Phases *f) {
    free(f->dim); free(f->busy); free(f->delay); free(f->key); free(f->sent); free(f->t1); free(f->t2);
    free(f->t3); free(f->fifo); free(f->hastie); free(f->lstride); free(f->lp); free(f->loff); free(f->lpool);
    memset(f, 0, sizeof *f);
}

/* A phase's lead map (stride, table) into the pool; -1 for None. */
static int lead_map(Phases *f, PyObject *m, Py_ssize_t i, int nd) {
    f->loff[i] = -1; f->lstride[i] = 1; f->lp[i] = 1;
    if (m == Py_None) return 0;
    if (!PyTuple_Check(m) || PyTuple_GET_SIZE(m) != 2 || !PyTuple_Check(PyTuple_GET_ITEM(m, 1))) {
        PyErr_SetString(PyExc_TypeError, "a phase's lead must be None or (stride, table)");
        return -1;
    }
    PyObject *tab = PyTuple_GET_ITEM(m, 1);
    Py_ssize_t p = PyTuple_GET_SIZE(tab);
    long long stride, v;
    if (p < 1 || p > MAX_NPUS || v_long(PyTuple_GET_ITEM(m, 0), 1, MAX_NPUS / p, "a lead map's stride", &stride)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a lead map needs a table of 1 to 2^40 NPUs");
        return -1;
    }
    if (f->npool + p > INT_MAX) { PyErr_SetString(PyExc_ValueError, "lead maps beyond 2^31 entries"); return -1; }
    if (f->npool + p > f->poolcap) {
        Py_ssize_t nc = (f->poolcap + p) * 2;
        int *np = realloc(f->lpool, (size_t)nc * sizeof(int));
        if (!np) { PyErr_NoMemory(); return -1; }
        f->lpool = np; f->poolcap = nc;
    }
    for (Py_ssize_t k = 0; k < p; k++) {  /* an NPU of the dim: stride x p <= 2^40 keeps every lead in range */
        if (v_long(PyTuple_GET_ITEM(tab, k), 0, p - 1, "a lead map's entry", &v)) return -1;
        f->lpool[f->npool + k] = (int)v;
    }
    f->loff[i] = (int)f->npool; f->lstride[i] = stride; f->lp[i] = (int)p;
    f->npool += p;
    (void)nd;
    return 0;
}

/* Append the phases of one plan tuple; 0 or -1 (exception set). */
static int phases_add(Phases *f, PyObject *plan, int nd) {
    if (!PyTuple_Check(plan)) { PyErr_SetString(PyExc_TypeError, "a plan must be a tuple of phases"); return -1; }
    Py_ssize_t L = PyTuple_GET_SIZE(plan);
    if (L == 0) { PyErr_SetString(PyExc_ValueError, "a chunk has no phases"); return -1; }
    if (phases_grow(f, L)) { PyErr_NoMemory(); return -1; }
    int err = 0;
    for (Py_ssize_t k = 0; k < L; k++) {
        PyObject *ph = PyTuple_GET_ITEM(plan, k);
        if (!PyTuple_Check(ph) || PyTuple_GET_SIZE(ph) < 8) {
            PyErr_SetString(PyExc_TypeError, "a phase must be a Phase tuple");
            return -1;
        }
        Py_ssize_t i = f->len++;
        long d = PyLong_AsLong(PyTuple_GET_ITEM(ph, 0));
        if (d < 0 || d >= nd) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "phase dim out of range");
            return -1;
        }
        f->dim[i] = (int)d;
        f->busy[i] = num(PyTuple_GET_ITEM(ph, 2), &err);
        f->delay[i] = num(PyTuple_GET_ITEM(ph, 3), &err);
        f->key[i] = num(PyTuple_GET_ITEM(ph, 4), &err);
        f->sent[i] = num(PyTuple_GET_ITEM(ph, 5), &err);
        int fifo = PyObject_IsTrue(PyTuple_GET_ITEM(ph, 6));
        if (fifo < 0) return -1;
        f->fifo[i] = (unsigned char)fifo;
        PyObject *tie = PyTuple_GET_ITEM(ph, 7);
        f->hastie[i] = 0;
        f->t1[i] = f->t2[i] = f->t3[i] = 0.0;
        if (PyTuple_Check(tie) && PyTuple_GET_SIZE(tie) == 3) {
            f->hastie[i] = 1;
            f->t1[i] = num(PyTuple_GET_ITEM(tie, 0), &err);
            f->t2[i] = num(PyTuple_GET_ITEM(tie, 1), &err);
            f->t3[i] = num(PyTuple_GET_ITEM(tie, 2), &err);
        }
        if (err) return -1;
        if (!(isfinite(f->busy[i]) && f->busy[i] >= 0.0 && isfinite(f->delay[i]) && f->delay[i] >= 0.0 &&
              isfinite(f->sent[i]) && f->sent[i] >= 0.0 && isfinite(f->key[i]) && isfinite(f->t1[i]) &&
              isfinite(f->t2[i]) && isfinite(f->t3[i]))) {
            PyErr_SetString(PyExc_ValueError, "a phase's busy, delay and sent must be finite and >= 0, its key and ties finite");
            return -1;
        }
        if (lead_map(f, PyTuple_GET_SIZE(ph) > 8 ? PyTuple_GET_ITEM(ph, 8) : Py_None, i, nd)) return -1;
    }
    return 0;
}

/* Plans by identity (chunks sharing a tuple share its phases); the table holds a reference to each. */
typedef struct { PyObject **key; int *val; Py_ssize_t cap, n; } IdTable;

static int id_grow(IdTable *tb) {
    Py_ssize_t nc = tb->cap ? tb->cap * 2 : 64;
    PyObject **nk = calloc(nc, sizeof(PyObject *));
    int *nv = calloc(nc, sizeof(int));
    if (!nk || !nv) { free(nk); free(nv); return -1; }
    for (Py_ssize_t k = 0; k < tb->cap; k++) {
        if (!tb->key[k]) continue;
        size_t h = ((size_t)tb->key[k] >> 4) & (size_t)(nc - 1);
        while (nk[h]) h = (h + 1) & (size_t)(nc - 1);
        nk[h] = tb->key[k]; nv[h] = tb->val[k];
    }
    free(tb->key); free(tb->val);
    tb->key = nk; tb->val = nv; tb->cap = nc;
    return 0;
}

static void id_free(IdTable *tb) {
    for (Py_ssize_t k = 0; k < tb->cap; k++) Py_XDECREF(tb->key[k]);
    free(tb->key); free(tb->val);
    memset(tb, 0, sizeof *tb);
}

static int plan_id(Sim *s, IdTable *tb, PyObject *plan) {
    if (2 * (tb->n + 1) > tb->cap && id_grow(tb)) { PyErr_NoMemory(); return -1; }
    size_t h = ((size_t)plan >> 4) & (size_t)(tb->cap - 1);
    while (tb->key[h] && tb->key[h] != plan) h = (h + 1) & (size_t)(tb->cap - 1);
    if (tb->key[h]) return tb->val[h];
    if (s->nplans + 2 > s->poffcap) {
        Py_ssize_t nc = (s->poffcap + 2) * 2;
        Py_ssize_t *np = realloc(s->poff, (size_t)nc * sizeof(Py_ssize_t));
        if (!np) { PyErr_NoMemory(); return -1; }
        s->poff = np; s->poffcap = nc;
    }
    if (s->nplans == 0) s->poff[0] = 0;
    Py_ssize_t before = s->ph.len;
    if (phases_add(&s->ph, plan, s->nd)) return -1;
    if (s->notie)
        for (Py_ssize_t k = before; k < s->ph.len; k++)
            if (s->ph.hastie[k]) {
                PyErr_SetString(PyExc_ValueError, "a phase with tie keys in a run declared without them (NetRules.tieless)");
                return -1;
            }
    Py_INCREF(plan);
    tb->key[h] = plan; tb->n += 1;
    int id = (int)s->nplans++;
    tb->val[h] = id;
    s->poff[s->nplans] = s->ph.len;
    return id;
}

/* ----- the callbacks -------------------------------------------------------------------------- */
typedef struct { IdTable tb; PyObject *plans; PyObject *hooks; int *ids; Py_ssize_t idcap; } Ctx;

static int add_plans(Sim *s, Ctx *cx, PyObject *seq, int owner, long long prio) {
    PyObject *fast = seq_tuple(seq, "plans must be a sequence of phase tuples");  /* ours: no plan freed meanwhile */
    if (!fast) return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(fast);
    if (n > INT_MAX - s->nchunks) { Py_DECREF(fast); PyErr_SetString(PyExc_ValueError, "too many chunks"); return -1; }
    if (n > cx->idcap) {
        int *ni = realloc(cx->ids, (size_t)n * sizeof(int));
        if (!ni) { Py_DECREF(fast); PyErr_NoMemory(); return -1; }
        cx->ids = ni; cx->idcap = n;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        int id = plan_id(s, &cx->tb, PyTuple_GET_ITEM(fast, k));
        if (id < 0) { Py_DECREF(fast); return -1; }
        cx->ids[k] = id;
    }
    Py_DECREF(fast);
    if (sim_add_chunks(s, cx->ids, (int)n, owner, prio)) { PyErr_NoMemory(); return -1; }
    return 0;
}

static int issue_fixed(Sim *s, int i, double t) {
    (void)t;
    Ctx *cx = s->ctx;
    if (add_plans(s, cx, cx->plans, i, 0)) return -1;
    return sim_rank_keys(s) ? (PyErr_NoMemory(), -1) : 0;  /* every phase is known: queues by rank */
}

static int issue_hook(Sim *s, int i, double t) {
    Ctx *cx = s->ctx;
    PyObject *r = PyObject_CallMethod(cx->hooks, "issue", "idL", i, t, s->lead);
    if (!r) return -1;
    if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 2) {
        Py_DECREF(r);
        PyErr_SetString(PyExc_TypeError, "issue() must return (plans, priority)");
        return -1;
    }
    long long prio = PyLong_AsLongLong(PyTuple_GET_ITEM(r, 1));
    int rc = (prio == -1 && PyErr_Occurred()) ? -1 : add_plans(s, cx, PyTuple_GET_ITEM(r, 0), i, prio);
    Py_DECREF(r);
    return rc;
}

static int resumed_hook(Sim *s) {
    Ctx *cx = s->ctx;
    PyObject *r = PyObject_CallMethod(cx->hooks, "resumed", NULL);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

/* ----- graphs from sequences ------------------------------------------------------------------ */
typedef struct { int *kinds, *res, *sdst; double *dur, *delays, *slag, *ideal; Py_ssize_t *soff; } GraphBuf;

static void gb_free(GraphBuf *b) {
    free(b->kinds); free(b->res); free(b->sdst); free(b->dur); free(b->delays); free(b->slag); free(b->ideal);
    free(b->soff);
}

/* o's items as n ints in [lo, hi] (n: want, or any if -1), into a new *out; 0 or -1. */
static int ints(PyObject *o, Py_ssize_t want, int **out, Py_ssize_t *len, long long lo, long long hi, const char *what) {
    PyObject *f = seq_tuple(o, "a graph's arrays must be sequences of numbers");
    if (!f) return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(f);
    long long v;
    int rc = -1;
    if (want >= 0 && n != want) { PyErr_SetString(PyExc_ValueError, "graph arrays differ in length"); goto done; }
    if (!(*out = malloc((size_t)(n + 1) * sizeof(int)))) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t k = 0; k < n; k++) {
        if (v_long(PyTuple_GET_ITEM(f, k), lo, hi, what, &v)) goto done;
        (*out)[k] = (int)v;
    }
    if (len) *len = n;
    rc = 0;
done:
    Py_DECREF(f);
    return rc;
}

/* o's items as `want` finite numbers >= 0, into a new *out; 0 or -1. */
static int doubles(PyObject *o, Py_ssize_t want, double **out, const char *what) {
    PyObject *f = seq_tuple(o, "a graph's arrays must be sequences of numbers");
    if (!f) return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(f);
    int err = 0;
    if (n != want) { Py_DECREF(f); PyErr_SetString(PyExc_ValueError, "graph arrays differ in length"); return -1; }
    if (!(*out = malloc((size_t)(n + 1) * sizeof(double)))) { Py_DECREF(f); PyErr_NoMemory(); return -1; }
    for (Py_ssize_t k = 0; k < n && !err; k++) (*out)[k] = num(PyTuple_GET_ITEM(f, k), &err);
    Py_DECREF(f);
    return err || v_doubles(*out, n, 0.0, 0, what) ? -1 : 0;
}

static int graph_from(PyObject *t, Graph *g, GraphBuf *b) {
    PyObject *kinds, *res, *dur, *delays, *soff, *sdst, *slag, *ideal;
    int end, excl, by_id, ebr;
    double min_ns;
    if (!PyTuple_Check(t)) { PyErr_SetString(PyExc_TypeError, "a graph must be a tuple (dse.sim.engine._graph_args)"); return -1; }
    if (!PyArg_ParseTuple(t, "OOOOOOOiiidiO", &kinds, &res, &dur, &delays, &soff, &sdst, &slag, &end, &excl, &by_id,
                          &min_ns, &ebr, &ideal))
        return -1;
    Py_ssize_t n, ns;
    int *tmp = NULL;
    if (ints(kinds, -1, &b->kinds, &n, N_COMPUTE, N_REPLAY, "a node's kind") ||
        (n < 1 || n >= INT_MAX ? (PyErr_SetString(PyExc_ValueError, "a graph needs 1 to 2^31-2 nodes"), 1) : 0) ||
        ints(res, n, &b->res, NULL, -1, NET, "a node's resource") || doubles(dur, n, &b->dur, "a node's duration") ||
        doubles(delays, n, &b->delays, "a node's delay") || ints(sdst, -1, &b->sdst, &ns, 0, n - 1, "a successor") ||
        ints(soff, n + 1, &tmp, NULL, 0, ns, "a successor offset") || v_offsets(tmp, n + 1, ns, 0, "successor offsets") ||
        doubles(slag, ns, &b->slag, "a successor's lag") || (ideal != Py_None && doubles(ideal, n, &b->ideal, "ideal ns")) ||
        v_doubles(&min_ns, 1, 0.0, 0, "min_ns")) {
        free(tmp);
        return -1;
    }
    if (end < 0 || end >= n) { free(tmp); PyErr_SetString(PyExc_ValueError, "the end node is not a node"); return -1; }
    b->soff = malloc((size_t)(n + 1) * sizeof(Py_ssize_t));
    if (!b->soff) { free(tmp); PyErr_NoMemory(); return -1; }
    for (Py_ssize_t k = 0; k <= n; k++) b->soff[k] = tmp[k];
    free(tmp);
    g->n = (int)n; g->kinds = b->kinds; g->res = b->res; g->dur = b->dur; g->delays = b->delays;
    g->soff = b->soff; g->sdst = b->sdst; g->slag = b->slag; g->end = end; g->comm_exclusive = excl;
    g->by_id = by_id; g->min_ns = min_ns; g->end_before_release = ebr; g->ideal = b->ideal;
    return 0;
}

/* ----- a fixed service order ------------------------------------------------------------------ */
typedef struct { int *seq; Py_ssize_t *off; } OrderBuf;

/* Flatten `order` (one sequence of chunk ids >= 0 per dim) into b; 0 or -1 (exception set). */
static int order_from(PyObject *order, int nd, OrderBuf *b) {
    static const char *bad = "a service order needs one sequence of chunk ids >= 0 per dimension";
    PyObject *f = seq_tuple(order, bad), *part = NULL;
    if (!f) return -1;
    Py_ssize_t total = 0;
    if (PyTuple_GET_SIZE(f) != nd) { PyErr_SetString(PyExc_ValueError, bad); goto fail; }
    if (!(b->off = malloc((size_t)(nd + 1) * sizeof(Py_ssize_t)))) { PyErr_NoMemory(); goto fail; }
    b->off[0] = 0;
    for (int d = 0; d < nd; d++) {
        if (!(part = seq_tuple(PyTuple_GET_ITEM(f, d), bad))) goto fail;
        Py_ssize_t n = PyTuple_GET_SIZE(part);
        int *grown = realloc(b->seq, (size_t)(total + n + 1) * sizeof(int));
        if (!grown) { PyErr_NoMemory(); goto fail; }
        b->seq = grown;
        for (Py_ssize_t k = 0; k < n; k++) {
            long long v;
            if (v_long(PyTuple_GET_ITEM(part, k), 0, INT_MAX, "a service order's chunk id", &v)) goto fail;
            b->seq[total + k] = (int)v;
        }
        Py_CLEAR(part);
        total += n;
        b->off[d + 1] = total;
    }
    Py_DECREF(f);
    return 0;
fail:
    Py_XDECREF(part);
    Py_DECREF(f);
    return -1;
}

/* Raise dse.sim.engine_io.ServiceStall(dim, entry, chunk) for a stalled fixed order. */
static void raise_stall(const Sim *s) {
    PyObject *mod = PyImport_ImportModule("dse.sim.engine_io");
    PyObject *cls = mod ? PyObject_GetAttrString(mod, "ServiceStall") : NULL;
    if (cls) {
        PyObject *args = Py_BuildValue("(nnn)", s->stall[0], s->stall[1], s->stall[2]);
        if (args) PyErr_SetObject(cls, args);
        Py_XDECREF(args);
    }
    Py_XDECREF(cls);
    Py_XDECREF(mod);
}

/* ----- results -------------------------------------------------------------------------------- */
static PyObject *floats(const double *v, Py_ssize_t n) {
    PyObject *t = PyTuple_New(n);
    if (!t) return NULL;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *x = PyFloat_FromDouble(v[k]);
        if (!x) { Py_DECREF(t); return NULL; }
        PyTuple_SET_ITEM(t, k, x);
    }
    return t;
}

static PyObject *results(Sim *s) {
    PyObject *log = Py_None;
    Py_INCREF(log);
    if (s->record) {
        Py_DECREF(log);
        log = PyList_New(s->nlog);
        if (!log) return NULL;
        for (Py_ssize_t k = 0; k < s->nlog; k++) {
            LogRec *r = &s->logv[k];
            PyObject *x = Py_BuildValue("(iidd)", r->c, r->step, r->start, r->end);
            if (!x) { Py_DECREF(log); return NULL; }
            PyList_SET_ITEM(log, k, x);
        }
    }
    return Py_BuildValue("(dNNNNNddddN)", s->finish, floats(s->busy, s->nd), floats(s->sent, s->nd),
                         floats(s->chunk_end, s->nchunks), floats(s->start, s->g.n), floats(s->end, s->g.n),
                         s->compute_ns, s->cpu_ns, s->comm_ns, s->bytes_sent, log);
}

static PyObject *run(PyObject *self, PyObject *args) {
    (void)self;
    int nd, policy, slots, shared, dimkey, use_prio, track, record, tieless;
    PyObject *plans, *graph, *hooks, *order = Py_None;
    if (!PyArg_ParseTuple(args, "iiiiiiiiiOOO|O", &nd, &policy, &slots, &shared, &dimkey, &use_prio, &track, &record,
                          &tieless, &plans, &graph, &hooks, &order))
        return NULL;
    if (nd < 1 || nd > MAX_ND || slots < 1 || policy < FIFO || policy > FIXED_SEQ) {
        PyErr_SetString(PyExc_ValueError, "nd must be 1 to 65535, slots >= 1 and the policy 0, 1, 2 or 3");
        return NULL;
    }
    if ((policy == FIXED_SEQ) != (order != Py_None)) {
        PyErr_SetString(PyExc_ValueError, "a service order goes with the FIXED_SEQ policy, and only with it");
        return NULL;
    }
    Sim s;
    Ctx cx;
    GraphBuf gb;
    OrderBuf ob = {NULL, NULL};
    memset(&cx, 0, sizeof cx);
    memset(&gb, 0, sizeof gb);
    memset(&s, 0, sizeof s);
    PyObject *out = NULL;
    Graph g;
    if (graph == Py_None) {
        graph_single(&g);
        if (!PyList_Check(plans)) { PyErr_SetString(PyExc_TypeError, "plans must be a list"); return NULL; }
    } else if (graph_from(graph, &g, &gb)) {
        gb_free(&gb);
        return NULL;
    }
    if (order != Py_None && order_from(order, nd, &ob)) goto done;
    if (sim_init(&s, nd, policy, slots, shared, dimkey, use_prio, track, record, g.n)) {
        PyErr_NoMemory();
        goto done;
    }
    s.fseq = ob.seq; s.foff = ob.off;
    s.g = g;
    s.notie = tieless && !dimkey;
    s.ctx = &cx;
    cx.plans = plans; cx.hooks = hooks;
    s.issue_cb = graph == Py_None ? issue_fixed : issue_hook;
    s.resumed_cb = graph == Py_None ? NULL : resumed_hook;
    int rc = sim_go(&s);
    if (rc == -3) raise_stall(&s);
    else if (rc == -2) PyErr_SetString(PyExc_RuntimeError, "engine stalled (a dependency cycle)");
    else if (rc < 0 && !PyErr_Occurred()) PyErr_NoMemory();
    if (rc == 0) out = results(&s);
done:
    phases_free(&s.ph);
    free(s.poff);
    sim_free(&s);
    id_free(&cx.tb);
    free(cx.ids);
    gb_free(&gb);
    free(ob.seq); free(ob.off);
    return out;
}

static PyMethodDef methods[] = {
    {"run", run, METH_VARARGS, "Run the event engine (see dse/sim/engine_ref.py for the algorithm)."},
    {"batch_table", batch_table, METH_VARARGS, "Parse a shape table once (dse.sim.tables)."},
    {"batch_run", batch_run, METH_VARARGS, "Many points of one shape (dse.sim.batch)."},
    {"batch_costs", batch_costs, METH_VARARGS, "One point's costs from a shape table's kernel (the tests')."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_engine", "dse's event engine in C.", -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__engine(void) {
    PyObject *m = PyModule_Create(&module);
#ifdef __SIZEOF_INT128__
    int big = 1;
#else
    int big = 0;
#endif
    /* OfflineGreedy's big-integer arithmetic needs 128-bit integers in the batch (dse.sim.batch asks) */
    if (m && PyModule_AddIntConstant(m, "HAVE_INT128", big)) { Py_DECREF(m); return NULL; }
    return m;
}
