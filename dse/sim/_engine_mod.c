/* The Python entry of the C engine (module dse.sim._engine): converts phases and graphs (_convert.c),
 * calls back the planner, returns the numbers.
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
 *          bytes_sent, log list of (chunk, step, start, end) or None, the name of the loop that ran)
 * Every argument is checked before the run (nd 1 to 65535; the rest: _convert.c).
 *
 * loop_counts(reset=False): {loop name: runs of it since the module loaded} (every run: this entry's
 *   and the batch's); reset=True zeroes the counts after reading them.
 * set_flow(on): whether a single collective may run in _flow.c's loop (the engine's COMPACT loop runs
 *   it otherwise, to the same numbers); returns the previous setting. For tests and benchmarks.
 * LOOPS: the loops' names, in their enum's order.
 */
#include "_engine.h"
#include <limits.h>
#include <math.h>

#define MAX_ND 65535             /* dims of one run */

PyObject *batch_run(PyObject *self, PyObject *args);  /* _batch.c */
PyObject *batch_table(PyObject *self, PyObject *args);
PyObject *batch_costs(PyObject *self, PyObject *args);  /* _batch.c */
PyObject *batch_one(PyObject *self, PyObject *args);

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
    return Py_BuildValue("(dNNNNNddddNs)", s->finish, floats(s->busy, s->nd), floats(s->sent, s->nd),
                         floats(s->chunk_end, s->nchunks), floats(s->start, s->g.n), floats(s->end, s->g.n),
                         s->compute_ns, s->cpu_ns, s->comm_ns, s->bytes_sent, log, LOOP_NAMES[s->loop]);
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

/* ----- which loops ran ------------------------------------------------------------------------ */
static PyObject *loop_counts(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"reset", NULL};
    int reset = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|p", names, &reset)) return NULL;
    PyObject *d = PyDict_New();
    for (int k = 0; d && k < LOOP_COUNT; k++) {
        long long n = ATOMIC_LOAD(&loop_runs[k]);
        if (reset) ATOMIC_ADD(&loop_runs[k], -n);  /* a run counted meanwhile stays counted */
        PyObject *v = PyLong_FromLongLong(n);
        if (!v || PyDict_SetItemString(d, LOOP_NAMES[k], v)) Py_CLEAR(d);
        Py_XDECREF(v);
    }
    return d;
}

static PyObject *set_flow(PyObject *self, PyObject *arg) {
    (void)self;
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    int was = ATOMIC_LOAD(&flow_enabled);
    ATOMIC_STORE(&flow_enabled, on);
    return PyBool_FromLong(was);
}

static PyMethodDef methods[] = {
    {"run", run, METH_VARARGS, "Run the event engine (see dse/sim/engine_ref.py for the algorithm)."},
    {"loop_counts", (PyCFunction)(void (*)(void))loop_counts, METH_VARARGS | METH_KEYWORDS,
     "loop_counts(reset=False): {loop name: runs since the module loaded}; reset zeroes them after reading."},
    {"set_flow", set_flow, METH_O, "set_flow(on): may a single collective run in _flow.c's loop? Returns the last."},
    {"batch_table", batch_table, METH_VARARGS, "Parse a shape once, by field name (dse.sim.compiled); no argument: the field names."},
    {"batch_run", batch_run, METH_VARARGS, "Many points of one shape (dse.sim.compiled)."},
    {"batch_costs", batch_costs, METH_VARARGS, "One point's combos and costs from a shape's kernel (the tests')."},
    {"batch_one", batch_one, METH_VARARGS, "One point of a shape, as Python objects (evaluate's call)."},
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
    PyObject *names = m ? PyTuple_New(LOOP_COUNT) : NULL;
    for (int k = 0; names && k < LOOP_COUNT; k++) {
        PyObject *x = PyUnicode_FromString(LOOP_NAMES[k]);
        if (!x) Py_CLEAR(names); else PyTuple_SET_ITEM(names, k, x);
    }
    if (m && (!names || PyModule_AddObject(m, "LOOPS", names))) { Py_XDECREF(names); Py_DECREF(m); return NULL; }
    return m;
}
