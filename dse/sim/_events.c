/* The C engine's events (dse/sim/_engine.c runs them): the compact events' 4-ary heap, room for the
 * sources beside it (each dim's server event, lanes of arrivals in time order), and the push of either
 * kind of event. */
#include "_engine.h"
#include <math.h>

/* ----- the compact event heap ------------------------------------------------------------------ */
/* The compact events live in a 4-ary heap: half the levels of a binary one, its children adjacent. */
static inline int ev2_less(const Ev2 *x, const Ev2 *y) {  /* branch-free: the order is data, not a pattern */
    return (x->t < y->t) | ((x->t == y->t) & (x->key < y->key));
}

/* Put a made event into the heap (its seq already given). */
static int ev2_insert(Sim *s, Ev2 e) {
    if (s->nev == s->evcap && grow((void **)&s->ev2, &s->evcap, s->nev + 1, sizeof(Ev2))) return -1;
    Ev2 *h = s->ev2;
    Py_ssize_t i = s->nev++;
    while (i > 0) {
        Py_ssize_t p = (i - 1) / 4;
        if (!ev2_less(&e, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
    return 0;
}

int ev2_push(Sim *s, double t, int cls, int kind, int a, int b) {
    Ev2 e;
    e.t = t; e.key = ((unsigned long long)cls << 58) | (unsigned long long)s->counter++;
    e.kind = kind; e.a = a; e.b = b;
    return ev2_insert(s, e);
}

void ev2_pop(Sim *s, Ev *out) {
    Ev2 *h = s->ev2;
    Ev2 top = h[0], last = h[--s->nev];
    Py_ssize_t i = 0, n = s->nev;
    for (;;) {
        Py_ssize_t c = 4 * i + 1;
        if (c >= n) break;
        Py_ssize_t m = c, end = c + 4 < n ? c + 4 : n;
        for (Py_ssize_t k = c + 1; k < end; k++) m = ev2_less(&h[k], &h[m]) ? k : m;
        if (!ev2_less(&h[m], &last)) break;
        h[i] = h[m];
        i = m;
    }
    if (n > 0) h[i] = last;
    out->t = top.t; out->seq = (long long)(top.key & ((1ULL << 58) - 1)); out->cls = (short)(top.key >> 58);
    out->kind = top.kind; out->a = top.a; out->b = top.b;
}


/* ----- event sources beside the heap (compact events only) -------------------------------------
 * heads[0..nd) hold each dim's one pending server event (COMPLETE or RELEASE) when a dim serves one
 * phase at a time (`srv`), heads[nd + k] lane k's first arrival; an empty head has t = inf. The next
 * event is the least of the heap's top and the heads, by the same (t, key) order. */
int heads_room(Sim *s, int n) {
    if (n <= s->headcap) return 0;
    int nc = s->headcap ? s->headcap : 8;
    while (nc < n) nc *= 2;
    Ev2 *nh = realloc(s->heads, (size_t)nc * sizeof(Ev2));
    if (!nh) return -1;
    for (int k = s->headcap; k < nc; k++) nh[k].t = INFINITY, nh[k].key = ~0ULL;
    s->heads = nh; s->headcap = nc;
    return 0;
}

/* The lane of arrivals `delay` after a phase on dim d (made if new); -1 out of memory, -2 none (the
 * heads are 64 at most). */
int lane_of(Sim *s, int d, double delay) {
    int k = s->lastlane[d];
    if (k < s->nlanes && s->lanes[k].dim == d && s->lanes[k].delay == delay) return k;
    for (k = 0; k < s->nlanes && !(s->lanes[k].dim == d && s->lanes[k].delay == delay); k++) {}
    if (k == s->nlanes) {
        if (s->nd + k >= MAX_HEADS) return -2;
        if (s->nlanes == s->lanecap) {
            int nc = s->lanecap ? 2 * s->lanecap : 8;
            Lane *nl = realloc(s->lanes, (size_t)nc * sizeof(Lane));
            if (!nl) return -1;
            memset(nl + s->lanecap, 0, (size_t)(nc - s->lanecap) * sizeof(Lane));
            s->lanes = nl; s->lanecap = nc;
        }
        if (heads_room(s, s->nd + k + 1)) return -1;
        s->lanes[k].dim = d; s->lanes[k].delay = delay; s->lanes[k].head = s->lanes[k].len = 0;
        s->nlanes++;
    }
    s->lastlane[d] = k;
    return k;
}

/* Room for one more arrival in lane L (twice its capacity, 16 at first); 0 or -1. */
int lane_room(Lane *L) {
    int nc = L->cap ? 2 * L->cap : 16;
    Ev2 *nb = malloc((size_t)nc * sizeof(Ev2));
    if (!nb) return -1;
    for (int j = 0; j < L->len; j++) nb[j] = L->buf[(L->head + j) & (L->cap - 1)];
    free(L->buf);
    L->buf = nb; L->cap = nc; L->head = 0;
    return 0;
}

/* ----- either heap --------------------------------------------------------------------------- */
/* Push an event made of its fields (written in place: no temporary struct to copy). `tie`: NULL, or
 * (a1, a2, a3, st) with `dk`. */
int ev_push(Sim *s, double t, int cls, int kind, int a, int b, const double *tie, int dk) {
    if (s->notie) return ev2_push(s, t, cls, kind, a, b);
    if (s->nev == s->evcap && grow((void **)&s->ev, &s->evcap, s->nev + 1, sizeof(Ev))) return -1;
    Ev *h = s->ev;
    long long seq = s->counter++;
    double a1 = 0.0, a2 = 0.0, a3 = 0.0, st = 0.0;
    if (tie) { a1 = tie[0]; a2 = tie[1]; a3 = tie[2]; st = tie[3]; }
    Py_ssize_t i = s->nev++;
    while (i > 0) {
        Py_ssize_t p = (i - 1) / 2;
        const Ev *y = &h[p];
        int less;
        if (t != y->t) less = t < y->t;
        else if (cls != y->cls) less = cls < y->cls;
        else if (a1 != y->a1) less = a1 < y->a1;
        else if (a2 != y->a2) less = a2 < y->a2;
        else if (a3 != y->a3) less = a3 < y->a3;
        else if (st != y->st) less = st < y->st;
        else if (dk != y->dk) less = dk < y->dk;
        else less = seq < y->seq;
        if (!less) break;
        h[i] = h[p];
        i = p;
    }
    Ev *e = &h[i];
    e->t = t; e->a1 = a1; e->a2 = a2; e->a3 = a3; e->st = st; e->seq = seq;
    e->cls = (short)cls; e->dk = (short)dk; e->kind = kind; e->a = a; e->b = b;
    return 0;
}
