/* The event engine's general containers (the engine: dse/sim/_engine.c): growable arrays, the event
 * heap with tie keys (the compact one and the sources beside it are the engine's own), keyed
 * heaps, and each dimension's waiting deque. */
#include "_engine.h"

/* ----- small growable arrays ------------------------------------------------------------------ */
int grow(void **p, Py_ssize_t *cap, Py_ssize_t need, size_t size) {
    if (need <= *cap) return 0;
    Py_ssize_t nc = *cap ? *cap : 16;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, (size_t)nc * size);
    if (!q) return -1;
    *p = q; *cap = nc;
    return 0;
}

/* ----- the event heap with tie keys: ordered by ev_less ----------------------------------------- */
void ev_pop(Sim *s, Ev *out) {
    Ev *h = s->ev;
    *out = h[0];
    Ev last = h[--s->nev];
    Py_ssize_t i = 0, n = s->nev;
    for (;;) {
        Py_ssize_t l = 2 * i + 1;
        if (l >= n) break;
        Py_ssize_t m = l;
        if (l + 1 < n && ev_less(&h[l + 1], &h[l])) m = l + 1;
        if (!ev_less(&h[m], &last)) break;
        h[i] = h[m];
        i = m;
    }
    if (n > 0) h[i] = last;
}

/* ----- keyed min-heaps: (key, seq, item) -------------------------------------------------------- */
int kh_push(KHeap *hp, KItem it) {
    if (hp->n == hp->cap && grow((void **)&hp->h, &hp->cap, hp->n + 1, sizeof(KItem))) return -1;
    Py_ssize_t i = hp->n++;
    while (i > 0) {
        Py_ssize_t p = (i - 1) / 2;
        if (!kh_less(&it, &hp->h[p])) break;
        hp->h[i] = hp->h[p];
        i = p;
    }
    hp->h[i] = it;
    return 0;
}

KItem kh_pop(KHeap *hp) {
    KItem top = hp->h[0];
    KItem last = hp->h[--hp->n];
    Py_ssize_t i = 0, n = hp->n;
    for (;;) {
        Py_ssize_t l = 2 * i + 1;
        if (l >= n) break;
        Py_ssize_t m = l;
        if (l + 1 < n && kh_less(&hp->h[l + 1], &hp->h[l])) m = l + 1;
        if (!kh_less(&hp->h[m], &last)) break;
        hp->h[i] = hp->h[m];
        i = m;
    }
    if (n > 0) hp->h[i] = last;
    return top;
}

/* ----- a dimension's waiting phases: a deque with insertion (O(1) at both ends) ----------------- */
static int q_room_back(Deque *q) {
    if (q->head + q->len < q->cap) return 0;
    if (q->len >= q->cap / 2) {
        Py_ssize_t nc = q->cap ? 2 * q->cap : 16;
        KItem *nb = realloc(q->buf, (size_t)nc * sizeof(KItem));
        if (!nb) return -1;
        q->buf = nb; q->cap = nc;
    }
    Py_ssize_t nh = (q->cap - q->len) / 4;
    memmove(&q->buf[nh], &q->buf[q->head], (size_t)q->len * sizeof(KItem));
    q->head = nh;
    return 0;
}

int q_insert(Deque *q, Py_ssize_t j, KItem w) {
    if (j < q->len - j && q->head > 0) {
        memmove(&q->buf[q->head - 1], &q->buf[q->head], (size_t)j * sizeof(KItem));
        q->head -= 1;
    } else {
        if (q_room_back(q)) return -1;
        memmove(q_at(q, j + 1), q_at(q, j), (size_t)(q->len - j) * sizeof(KItem));
    }
    *q_at(q, j) = w;
    q->len += 1;
    return 0;
}
