/* Python's objects into the C engine's arrays, for its entry (_engine_mod.c): Phase tuples into flat
 * phases (plans by identity: chunks sharing one tuple share its conversion), graphs and service orders
 * from sequences of numbers.
 *
 * Everything is checked before the run (a ValueError or TypeError, never a crash; helpers in _validate.c):
 * a phase's dim in range, busy and delay 0 to 1e250 ns, bytes finite and >= 0, key and tie offsets finite; a lead
 * map's stride >= 1 and entries NPUs of the dim (0 .. len - 1), stride x len <= 2^40
 * (dse.core.limits.MAX_NPUS: every lead stays an NPU index); a graph a tuple whose kinds, resources,
 * successors and offsets are in range, durations, delays, lags, min_ns and ideal times finite and >= 0;
 * a service order's ids 0 .. 2^31-1. Sequences are read through a tuple held here, so that no item's
 * conversion can free what is being read.
 */
#include "_engine.h"

/* A phase's busy or delay is at most this: no sum of a run's times reaches the doubles' end. */
#define MAX_PHASE_NS 1e250
#include <limits.h>
#include <math.h>

#define MAX_NPUS (1LL << 40)     /* dse.core.limits.MAX_NPUS: a lead map's stride x NPUs */

/* ----- phases from Phase tuples --------------------------------------------------------------- */
static double num(PyObject *o, int *err) {
    double v = PyFloat_AsDouble(o);
    if (v == -1.0 && PyErr_Occurred()) *err = 1;
    return v;
}

/* A tuple of o's items (o itself if a tuple): held while its items are read, whatever their conversions do. */
PyObject *seq_tuple(PyObject *o, const char *what) {
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
        if (!(f->busy[i] >= 0.0 && f->busy[i] <= MAX_PHASE_NS && f->delay[i] >= 0.0 && f->delay[i] <= MAX_PHASE_NS &&
              isfinite(f->sent[i]) && f->sent[i] >= 0.0 && isfinite(f->key[i]) && isfinite(f->t1[i]) &&
              isfinite(f->t2[i]) && isfinite(f->t3[i]))) {
            PyErr_SetString(PyExc_ValueError,
                            "a phase's busy and delay must be 0 to 1e250 ns, its sent finite and >= 0, its key and ties finite");
            return -1;
        }
        if (lead_map(f, PyTuple_GET_SIZE(ph) > 8 ? PyTuple_GET_ITEM(ph, 8) : Py_None, i, nd)) return -1;
    }
    return 0;
}

/* Plans by identity (chunks sharing a tuple share its phases); the table holds a reference to each. */

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

void id_free(IdTable *tb) {
    for (Py_ssize_t k = 0; k < tb->cap; k++) Py_XDECREF(tb->key[k]);
    free(tb->key); free(tb->val);
    memset(tb, 0, sizeof *tb);
}

int plan_id(Sim *s, IdTable *tb, PyObject *plan) {
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

/* ----- graphs from sequences ------------------------------------------------------------------ */

void gb_free(GraphBuf *b) {
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

int graph_from(PyObject *t, Graph *g, GraphBuf *b) {
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

/* Flatten `order` (one sequence of chunk ids >= 0 per dim) into b; 0 or -1 (exception set). */
int order_from(PyObject *order, int nd, OrderBuf *b) {
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
