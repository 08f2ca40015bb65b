/* The floor an event loop can reach: chunks run their phases through per-dimension FIFO queues, one
 * binary heap of (time, seq, chunk) completions, nothing else (no ties, latency, policies or records).
 * scripts/bench_evaluate.py compiles it in the same run and times it on the same phases as dse. */
#include <stdlib.h>

typedef struct { double t; long long seq; int c; } E;

static int less(const E *x, const E *y) { return x->t != y->t ? x->t < y->t : x->seq < y->seq; }

/* plan_dim/plan_busy: nphases per chunk, chunk-major; returns the finish time (or -1 out of memory). */
double minimal_loop(int nchunks, int nphases, int nd, const int *plan_dim, const double *plan_busy) {
    E *h = malloc(sizeof(E) * (size_t)(nchunks + 1));
    int *q = malloc(sizeof(int) * (size_t)nd * (size_t)(nchunks + 1)), *qh = calloc(nd, sizeof(int)),
        *qt = calloc(nd, sizeof(int)), *busy = calloc(nd, sizeof(int)), *pos = calloc(nchunks, sizeof(int));
    if (!h || !q || !qh || !qt || !busy || !pos) return -1.0;
    int n = 0;
    long long seq = 0;
    double finish = 0.0;
#define PUSH(tt, cc) do { E ev_ = {tt, seq++, cc}; int i = n++; \
        while (i > 0 && less(&ev_, &h[(i - 1) / 2])) { h[i] = h[(i - 1) / 2]; i = (i - 1) / 2; } h[i] = ev_; } while (0)
#define START(d, tt) do { if (!busy[d] && qh[d] != qt[d]) { int cc = q[(size_t)(d) * (nchunks + 1) + qh[d]]; \
        qh[d] = (qh[d] + 1) % (nchunks + 1); busy[d] = 1; PUSH((tt) + plan_busy[(size_t)cc * nphases + pos[cc]], cc); } } while (0)
#define ENQ(d, cc) do { q[(size_t)(d) * (nchunks + 1) + qt[d]] = cc; qt[d] = (qt[d] + 1) % (nchunks + 1); } while (0)
    for (int c = 0; c < nchunks; c++) { int d = plan_dim[(size_t)c * nphases]; ENQ(d, c); START(d, 0.0); }
    while (n > 0) {
        E e = h[0];
        E last = h[--n];
        int i = 0;
        for (;;) {
            int l = 2 * i + 1;
            if (l >= n) break;
            int m = (l + 1 < n && less(&h[l + 1], &h[l])) ? l + 1 : l;
            if (!less(&h[m], &last)) break;
            h[i] = h[m];
            i = m;
        }
        if (n > 0) h[i] = last;
        int c = e.c, d = plan_dim[(size_t)c * nphases + pos[c]];
        busy[d] = 0;
        if (++pos[c] < nphases) { int d2 = plan_dim[(size_t)c * nphases + pos[c]]; ENQ(d2, c); START(d, e.t); START(d2, e.t); }
        else { if (e.t > finish) finish = e.t; START(d, e.t); }
    }
    free(h); free(q); free(qh); free(qt); free(busy); free(pos);
    return finish;
}
