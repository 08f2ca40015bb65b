/* The simulator's hot loop in C: the same algorithm as dse.simulate._run_servers, phase for phase.
 *
 * Why C: a 1024-NPU all-reduce at 64 chunks is ~1000 events; Python spends ~1 ms on them, C ~20 us,
 * which is what lets `dse` evaluate thousands of configurations per second. The pure-Python loop in
 * simulate.py stays the reference; the tests check that both give identical results.
 *
 * run(plans, nd, policy, slots, record, dimkey)
 *   plans: a list with one tuple of Phase per chunk (dse.costs.base.Phase: dim, kind, busy, delay,
 *          key, sent, fifo_only, tie); chunks sharing one tuple object share its conversion.
 * returns (finish, ends per chunk, busy per dim, bytes per dim, timeline list of
 *          (chunk, step, start, end) or None)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <string.h>

enum { FIFO = 0, SCF_PRIORITY = 1, SCF_ASTRA = 2 };
enum { COMPLETE = 0, RELEASE = 1, ARRIVE = 2 };

typedef struct {
    double end;
    int prio;
    double a1, a2, a3, start;
    int dk;
    long long seq;
    int kind, c, d;
} Ev;

typedef struct { double key; long long seq; int c; } Wt;

/* A dimension's waiting phases: a growable deque (live items at buf[head .. head+len)), so that
 * serving the front is O(1) and an insertion shifts the shorter side. */
typedef struct { Wt *buf; int head, len, cap; } Queue;

static inline Wt *q_at(Queue *q, int j) { return &q->buf[q->head + j]; }

/* Room for one more item at the back: re-centre the items, or double the buffer. */
static int q_room_back(Queue *q) {
    if (q->head + q->len < q->cap) return 0;
    if (q->len >= q->cap / 2) {
        int nc = q->cap ? 2 * q->cap : 16;
        Wt *nb = realloc(q->buf, (size_t)nc * sizeof(Wt));
        if (!nb) return -1;
        q->buf = nb; q->cap = nc;
    }
    int nh = (q->cap - q->len) / 4;
    memmove(&q->buf[nh], &q->buf[q->head], (size_t)q->len * sizeof(Wt));
    q->head = nh;
    return 0;
}

/* Insert `w` before the item at position j (0 <= j <= len). */
static int q_insert(Queue *q, int j, Wt w) {
    if (j < q->len - j && q->head > 0) {  /* shift the front part one place left */
        memmove(&q->buf[q->head - 1], &q->buf[q->head], (size_t)j * sizeof(Wt));
        q->head -= 1;
    } else {
        if (q_room_back(q)) return -1;
        memmove(q_at(q, j + 1), q_at(q, j), (size_t)(q->len - j) * sizeof(Wt));
    }
    *q_at(q, j) = w;
    q->len += 1;
    return 0;
}

static inline Wt q_pop_front(Queue *q) {
    Wt w = q->buf[q->head];
    q->head += 1;
    q->len -= 1;
    return w;
}

static inline int ev_less(const Ev *x, const Ev *y) {
    if (x->end != y->end) return x->end < y->end;
    if (x->prio != y->prio) return x->prio < y->prio;
    if (x->a1 != y->a1) return x->a1 < y->a1;
    if (x->a2 != y->a2) return x->a2 < y->a2;
    if (x->a3 != y->a3) return x->a3 < y->a3;
    if (x->start != y->start) return x->start < y->start;
    if (x->dk != y->dk) return x->dk < y->dk;
    return x->seq < y->seq;
}

typedef struct {
    Ev *h; Py_ssize_t n, cap;
} Heap;

static int heap_push(Heap *hp, const Ev *e) {
    if (hp->n == hp->cap) {
        Py_ssize_t nc = hp->cap * 2 + 16;
        Ev *nh = realloc(hp->h, nc * sizeof(Ev));
        if (!nh) return -1;
        hp->h = nh; hp->cap = nc;
    }
    Py_ssize_t i = hp->n++;
    while (i > 0) {
        Py_ssize_t p = (i - 1) / 2;
        if (!ev_less(e, &hp->h[p])) break;
        hp->h[i] = hp->h[p];
        i = p;
    }
    hp->h[i] = *e;
    return 0;
}

static void heap_pop(Heap *hp, Ev *out) {
    *out = hp->h[0];
    Ev last = hp->h[--hp->n];
    Py_ssize_t i = 0, n = hp->n;
    for (;;) {
        Py_ssize_t l = 2 * i + 1;
        if (l >= n) break;
        Py_ssize_t r = l + 1, m = l;
        if (r < n && ev_less(&hp->h[r], &hp->h[l])) m = r;
        if (!ev_less(&hp->h[m], &last)) break;
        hp->h[i] = hp->h[m];
        i = m;
    }
    if (n > 0) hp->h[i] = last;
}

typedef struct {
    int nd, policy, slots, dimkey, record;
    const int *pdim; const double *pbusy, *pdelay, *pkey, *pt1, *pt2, *pt3; const unsigned char *pfifo;
    const int *poff, *cplan;
    int n;
    int *pos; int *running; double *started; double *ends;
    Queue *wait;
    Heap heap; long long counter;
    PyObject *log;
} Sim;

static inline int phase_index(Sim *s, int c) { return s->poff[s->cplan[c]] + s->pos[c]; }
static inline int plan_len(Sim *s, int c) { return s->poff[s->cplan[c] + 1] - s->poff[s->cplan[c]]; }

static int start(Sim *s, int c, int d, double t) {
    int i = phase_index(s, c);
    s->running[d] += 1;
    s->started[c] = t;
    double end = t + s->pbusy[i];
    double delay = s->pdelay[i];
    Ev e;
    e.a1 = t + s->pt1[i]; e.a2 = t + s->pt2[i]; e.a3 = t + s->pt3[i]; e.start = t;
    e.dk = s->dimkey ? d : 0; e.c = c; e.d = d;
    if (delay != 0.0) {
        e.end = end; e.prio = 1; e.seq = s->counter; e.kind = RELEASE;
        if (heap_push(&s->heap, &e)) return -1;
        e.end = end + delay; e.prio = 0; e.seq = s->counter + 1; e.kind = ARRIVE;
        if (heap_push(&s->heap, &e)) return -1;
        s->counter += 2;
    } else {
        e.end = end; e.prio = 0; e.seq = s->counter; e.kind = COMPLETE;
        if (heap_push(&s->heap, &e)) return -1;
        s->counter += 1;
    }
    return 0;
}

/* Queue chunk c's next phase at its dimension; returns the dimension, or -1 out of memory. */
static int enqueue(Sim *s, int c) {
    int i = phase_index(s, c);
    int d = s->pdim[i];
    Queue *q = &s->wait[d];
    int len = q->len;
    Wt w; w.key = s->pkey[i]; w.c = c; w.seq = 0;
    int j = len;
    if (s->policy == SCF_PRIORITY) {
        w.seq = s->counter++;
        int lo = 0, hi = len;  /* insort_right on (key, seq) */
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            const Wt *m = q_at(q, mid);
            if (w.key < m->key || (w.key == m->key && w.seq < m->seq)) hi = mid; else lo = mid + 1;
        }
        j = lo;
    } else if (s->policy == SCF_ASTRA) {
        int remaining_after = plan_len(s, c) - s->pos[c] - 1;
        if (!(s->pfifo[i] || remaining_after == 1)) {
            for (j = 0; j < len; j++) if (q_at(q, j)->key >= w.key) break;
        }
    }
    if (q_insert(q, j, w)) return -1;
    return d;
}

static int refill(Sim *s, int d, double t) {
    Queue *q = &s->wait[d];
    while (q->len > 0 && s->running[d] < s->slots) {
        int c = q_pop_front(q).c;
        if (start(s, c, d, t)) return -1;
    }
    return 0;
}

static double num(PyObject *o, int *err) {
    double v = PyFloat_AsDouble(o);
    if (v == -1.0 && PyErr_Occurred()) *err = 1;
    return v;
}

/* Append the phases of one plan tuple to the flat arrays; returns 0 or -1 (exception set). */
typedef struct {
    int *pdim; double *pbusy, *pdelay, *pkey, *psent, *pt1, *pt2, *pt3; unsigned char *pfifo;
    Py_ssize_t len, cap;
} Flat;

static int flat_grow(Flat *f, Py_ssize_t need) {
    if (f->len + need <= f->cap) return 0;
    Py_ssize_t nc = (f->cap + need) * 2;
    void *a;
#define GROW(field, T) a = realloc(f->field, (size_t)nc * sizeof(T)); if (!a) return -1; f->field = a;
    GROW(pdim, int) GROW(pbusy, double) GROW(pdelay, double) GROW(pkey, double) GROW(psent, double)
    GROW(pt1, double) GROW(pt2, double) GROW(pt3, double) GROW(pfifo, unsigned char)
#undef GROW
    f->cap = nc;
    return 0;
}

static int flat_add(Flat *f, PyObject *plan, int nd) {
    if (!PyTuple_Check(plan)) { PyErr_SetString(PyExc_TypeError, "a plan must be a tuple of phases"); return -1; }
    Py_ssize_t L = PyTuple_GET_SIZE(plan);
    if (flat_grow(f, L)) { PyErr_NoMemory(); return -1; }
    int err = 0;
    for (Py_ssize_t k = 0; k < L; k++) {
        PyObject *ph = PyTuple_GET_ITEM(plan, k);
        if (!PyTuple_Check(ph) || PyTuple_GET_SIZE(ph) < 8) {
            PyErr_SetString(PyExc_TypeError, "a phase must be a Phase tuple of 8 fields");
            return -1;
        }
        Py_ssize_t i = f->len++;
        long d = PyLong_AsLong(PyTuple_GET_ITEM(ph, 0));
        if (d < 0 || d >= nd) { if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "phase dim out of range"); return -1; }
        f->pdim[i] = (int)d;
        f->pbusy[i] = num(PyTuple_GET_ITEM(ph, 2), &err);
        f->pdelay[i] = num(PyTuple_GET_ITEM(ph, 3), &err);
        f->pkey[i] = num(PyTuple_GET_ITEM(ph, 4), &err);
        f->psent[i] = num(PyTuple_GET_ITEM(ph, 5), &err);
        int fifo = PyObject_IsTrue(PyTuple_GET_ITEM(ph, 6));
        if (fifo < 0) return -1;
        f->pfifo[i] = (unsigned char)fifo;
        PyObject *tie = PyTuple_GET_ITEM(ph, 7);
        if (PyTuple_Check(tie) && PyTuple_GET_SIZE(tie) == 3) {
            f->pt1[i] = num(PyTuple_GET_ITEM(tie, 0), &err);
            f->pt2[i] = num(PyTuple_GET_ITEM(tie, 1), &err);
            f->pt3[i] = num(PyTuple_GET_ITEM(tie, 2), &err);
        } else {
            f->pt1[i] = f->pt2[i] = f->pt3[i] = 0.0;
        }
        if (err) return -1;
    }
    return 0;
}

static void flat_free(Flat *f) {
    free(f->pdim); free(f->pbusy); free(f->pdelay); free(f->pkey); free(f->psent);
    free(f->pt1); free(f->pt2); free(f->pt3); free(f->pfifo);
}

static PyObject *run(PyObject *self, PyObject *args) {
    PyObject *plans;
    int nd, policy, slots, record, dimkey;
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "O!iiiii", &PyList_Type, &plans, &nd, &policy, &slots, &record, &dimkey))
        return NULL;
    if (nd < 1 || slots < 1) { PyErr_SetString(PyExc_ValueError, "nd and slots must be >= 1"); return NULL; }
    int n = (int)PyList_GET_SIZE(plans);

    Sim s;
    Flat f;
    memset(&s, 0, sizeof s);
    memset(&f, 0, sizeof f);
    double *busy = calloc(nd, sizeof(double)), *sent = calloc(nd, sizeof(double));
    /* unique plans by identity: a small open-addressing table of (object, plan index) */
    int tcap = 64;
    while (tcap < 2 * (n + 1)) tcap *= 2;
    PyObject **tkey = calloc(tcap, sizeof(PyObject *));
    int *tval = calloc(tcap, sizeof(int));
    int *poff = malloc((size_t)(n + 2) * sizeof(int));
    int *cplan = malloc((size_t)(n + 1) * sizeof(int));
    int nplans = 0;
    s.nd = nd; s.policy = policy; s.slots = slots; s.dimkey = dimkey; s.record = record; s.n = n;
    s.pos = calloc(n + 1, sizeof(int));
    s.started = calloc(n + 1, sizeof(double));
    s.ends = calloc(n + 1, sizeof(double));
    s.running = calloc(nd, sizeof(int));
    s.wait = calloc(nd, sizeof(Queue));
    if (!busy || !sent || !tkey || !tval || !poff || !cplan || !s.pos || !s.started || !s.ends || !s.running ||
        !s.wait) { PyErr_NoMemory(); goto done; }
    poff[0] = 0;
    for (int c = 0; c < n; c++) {
        PyObject *plan = PyList_GET_ITEM(plans, c);
        size_t h = ((size_t)plan >> 4) & (size_t)(tcap - 1);
        while (tkey[h] && tkey[h] != plan) h = (h + 1) & (size_t)(tcap - 1);
        if (!tkey[h]) {
            if (flat_add(&f, plan, nd)) goto done;
            tkey[h] = plan;
            tval[h] = nplans;
            poff[++nplans] = (int)f.len;
        }
        cplan[c] = tval[h];
        int p = tval[h];
        if (poff[p + 1] == poff[p]) { PyErr_SetString(PyExc_ValueError, "a chunk has no phases"); goto done; }
        for (int i = poff[p]; i < poff[p + 1]; i++) { busy[f.pdim[i]] += f.pbusy[i]; sent[f.pdim[i]] += f.psent[i]; }
    }
    s.pdim = f.pdim; s.pbusy = f.pbusy; s.pdelay = f.pdelay; s.pkey = f.pkey; s.pfifo = f.pfifo;
    s.pt1 = f.pt1; s.pt2 = f.pt2; s.pt3 = f.pt3; s.poff = poff; s.cplan = cplan;
    if (record) { s.log = PyList_New(0); if (!s.log) goto done; }

    for (int c = 0; c < n; c++) {
        int d = enqueue(&s, c);
        if (d < 0 || refill(&s, d, 0.0)) { PyErr_NoMemory(); goto done; }
    }
    double finish = 0.0;
    Ev e;
    while (s.heap.n > 0) {
        heap_pop(&s.heap, &e);
        double t = e.end;
        int c = e.c, d = e.d;
        if (e.kind != ARRIVE) s.running[d] -= 1;
        if (e.kind == RELEASE) {
            if (refill(&s, d, t)) { PyErr_NoMemory(); goto done; }
            continue;
        }
        if (s.log) {
            PyObject *rec = Py_BuildValue("(iidd)", c, s.pos[c], s.started[c], t);
            if (!rec || PyList_Append(s.log, rec)) { Py_XDECREF(rec); goto done; }
            Py_DECREF(rec);
        }
        s.pos[c] += 1;
        int d2 = -1;
        if (s.pos[c] < plan_len(&s, c)) {
            d2 = enqueue(&s, c);
            if (d2 < 0) { PyErr_NoMemory(); goto done; }
        } else {
            s.ends[c] = t;
            if (t > finish) finish = t;
        }
        if (e.kind == COMPLETE) {
            if (refill(&s, d, t)) { PyErr_NoMemory(); goto done; }
            if (d2 >= 0 && d2 != d && refill(&s, d2, t)) { PyErr_NoMemory(); goto done; }
        } else if (d2 >= 0) {
            if (refill(&s, d2, t)) { PyErr_NoMemory(); goto done; }
        }
    }
    {
        PyObject *ends = PyTuple_New(n), *bt = PyTuple_New(nd), *st = PyTuple_New(nd);
        if (!ends || !bt || !st) { Py_XDECREF(ends); Py_XDECREF(bt); Py_XDECREF(st); goto done; }
        for (int c = 0; c < n; c++) PyTuple_SET_ITEM(ends, c, PyFloat_FromDouble(s.ends[c]));
        for (int d = 0; d < nd; d++) {
            PyTuple_SET_ITEM(bt, d, PyFloat_FromDouble(busy[d]));
            PyTuple_SET_ITEM(st, d, PyFloat_FromDouble(sent[d]));
        }
        result = Py_BuildValue("(dNNNO)", finish, ends, bt, st, s.log ? s.log : Py_None);
    }
done:
    Py_XDECREF(s.log);
    if (s.wait) for (int d = 0; d < nd; d++) free(s.wait[d].buf);
    free(s.wait); free(s.running); free(s.pos); free(s.started); free(s.ends); free(s.heap.h);
    free(busy); free(sent); free(tkey); free(tval); free(poff); free(cplan);
    flat_free(&f);
    return result;
}

static PyMethodDef methods[] = {
    {"run", run, METH_VARARGS, "Run the chunk simulator's event loop (see dse/simulate.py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_csim", "The simulator's hot loop in C.", -1, methods};

PyMODINIT_FUNC PyInit__csim(void) { return PyModule_Create(&module); }
