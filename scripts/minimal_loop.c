/* The floor an event loop can reach on dse's events: chunks run their phases through per-dimension
 * FIFO queues with one binary heap of (time, seq) events, nothing else (no tie keys, policies,
 * lead, graph or records). A phase with an overlapped latency makes two events, as in dse: the
 * dimension's release when the transfer ends and the chunk's arrival `delay` later.
 * scripts/bench_evaluate.py compiles it in the same run and times it on the same phases as dse. */
#include <stdlib.h>

typedef struct { double t; long long seq; int c, kind; } E;
enum { COMPLETE, RELEASE, ARRIVE };

static int less(const E *x, const E *y) { return x->t != y->t ? x->t < y->t : x->seq < y->seq; }

typedef struct {
    E *h; int n; long long seq;
    int *q, *qh, *qt, *busy, *pos, cap, nphases;
    const int *dim; const double *dur, *delay;
} L;

static void push(L *s, double t, int c, int kind) {
    E e = {t, s->seq++, c, kind};
    int i = s->n++;
    while (i > 0 && less(&e, &s->h[(i - 1) / 2])) { s->h[i] = s->h[(i - 1) / 2]; i = (i - 1) / 2; }
    s->h[i] = e;
}

static E pop(L *s) {
    E top = s->h[0], last = s->h[--s->n];
    int i = 0;
    for (;;) {
        int l = 2 * i + 1;
        if (l >= s->n) break;
        int m = (l + 1 < s->n && less(&s->h[l + 1], &s->h[l])) ? l + 1 : l;
        if (!less(&s->h[m], &last)) break;
        s->h[i] = s->h[m];
        i = m;
    }
    if (s->n > 0) s->h[i] = last;
    return top;
}

static void enq(L *s, int d, int c) { s->q[d * s->cap + s->qt[d]] = c; s->qt[d] = (s->qt[d] + 1) % s->cap; }

static void start(L *s, int d, double t) {
    if (s->busy[d] || s->qh[d] == s->qt[d]) return;
    int c = s->q[d * s->cap + s->qh[d]];
    s->qh[d] = (s->qh[d] + 1) % s->cap;
    s->busy[d] = 1;
    int k = c * s->nphases + s->pos[c];
    if (s->delay[k] != 0.0) {
        push(s, t + s->dur[k], c, RELEASE);
        push(s, t + s->dur[k] + s->delay[k], c, ARRIVE);
    } else push(s, t + s->dur[k], c, COMPLETE);
}

/* dims/busy/delay: nphases per chunk, chunk-major; returns the finish time (or -1 out of memory). */
double minimal_loop(int nchunks, int nphases, int nd, const int *dims, const double *busy, const double *delay) {
    L s = {0};
    s.cap = nchunks + 1; s.nphases = nphases; s.dim = dims; s.dur = busy; s.delay = delay;
    s.h = malloc(sizeof(E) * (size_t)(2 * nchunks + 2));
    s.q = malloc(sizeof(int) * (size_t)nd * (size_t)s.cap);
    s.qh = calloc(nd, sizeof(int)); s.qt = calloc(nd, sizeof(int)); s.busy = calloc(nd, sizeof(int));
    s.pos = calloc(nchunks, sizeof(int));
    if (!s.h || !s.q || !s.qh || !s.qt || !s.busy || !s.pos) return -1.0;
    double finish = 0.0;
    for (int c = 0; c < nchunks; c++) { int d = dims[c * nphases]; enq(&s, d, c); start(&s, d, 0.0); }
    while (s.n > 0) {
        E e = pop(&s);
        int c = e.c, d = dims[c * nphases + s.pos[c]];
        if (e.kind != ARRIVE) s.busy[d] = 0;
        if (e.kind == RELEASE) { start(&s, d, e.t); continue; }
        if (++s.pos[c] < nphases) {
            int d2 = dims[c * nphases + s.pos[c]];
            enq(&s, d2, c);
            if (e.kind == COMPLETE) start(&s, d, e.t);
            start(&s, d2, e.t);
        } else {
            if (e.t > finish) finish = e.t;
            if (e.kind == COMPLETE) start(&s, d, e.t);
        }
    }
    free(s.h); free(s.q); free(s.qh); free(s.qt); free(s.busy); free(s.pos);
    return finish;
}
