/* The rings and the ranked smallest-first queues, inline: the engine's specialised loop runs them
 * on every phase (dse/sim/_queues.c has the rest and says what the rules are). */
#ifndef DSE_RANKED_H
#define DSE_RANKED_H
#include "_engine.h"

/* ----- rings of ints (capacities are powers of two) ------------------------------------------ */
static inline int ring_room(Ring *r) { return r->len < r->cap ? 0 : ring_grow(r); }

static inline int ring_push_back(Ring *r, int x) {
    if (ring_room(r)) return -1;
    r->buf[(r->head + r->len) & (r->cap - 1)] = x;
    r->len++;
    return 0;
}

static inline int ring_push_front(Ring *r, int x) {
    if (ring_room(r)) return -1;
    r->head = (r->head + r->cap - 1) & (r->cap - 1);
    r->buf[r->head] = x;
    r->len++;
    return 0;
}

static inline int ring_front(const Ring *r) { return r->buf[r->head]; }

static inline int ring_pop_front(Ring *r) {
    int x = r->buf[r->head];
    r->head = (r->head + 1) & (r->cap - 1);
    r->len--;
    return x;
}

/* ----- the same rules, ranked: a ring per rank, a bitmask of the non-empty ones ------------------ */

static inline int rb_push(RBuckets *q, int rank, int item) {
    if (ring_push_back(&q->r[rank], item)) return -1;
    q->mask |= 1ULL << rank;
    q->count++;
    return 0;
}

static inline int rb_pop(RBuckets *q) {
    int k = low_bit(q->mask);
    int x = ring_pop_front(&q->r[k]);
    if (!q->r[k].len) q->mask &= ~(1ULL << k);
    q->count--;
    return x;
}

static inline int rnode_new(RAstra *q, int rank, int item) {
    int i;
    if (q->freelist >= 0) {
        i = q->freelist;
        q->freelist = q->nodes[i].prev;
    } else {
        if (q->nn == q->capn && rnode_grow(q)) return -1;
        i = q->nn++;
    }
    q->nodes[i].rank = rank; q->nodes[i].item = item;
    return i;
}

static inline void rlink_before(RAstra *q, int i, int x) {  /* x = -1: at the back */
    int p = x >= 0 ? q->nodes[x].prev : q->tail;
    q->nodes[i].prev = p; q->nodes[i].next = x;
    if (p >= 0) q->nodes[p].next = i; else q->head = i;
    if (x >= 0) q->nodes[x].prev = i; else q->tail = i;
}

/* As aq_insert: the runs are indexed by rank, and records of equal keys share one run. */
HOT int ra_insert(RAstra *q, int rank, int item, int back) {
    int i = rnode_new(q, rank, item);
    if (i < 0) return -1;
    unsigned long long bit = 1ULL << rank;
    if (back) {
        rlink_before(q, i, -1);
        if (!q->mask || rank >= high_bit(q->mask)) {
            if (ring_push_back(&q->runs[rank], i)) return -1;
            q->mask |= bit;
        }
    } else {
        unsigned long long above = q->mask & ~(bit - 1);
        if (!above) {  /* nothing waiting has a key >= this one: the back, a record */
            rlink_before(q, i, -1);
            if (ring_push_back(&q->runs[rank], i)) return -1;
        } else {
            rlink_before(q, i, ring_front(&q->runs[low_bit(above)]));
            if (ring_push_front(&q->runs[rank], i)) return -1;
        }
        q->mask |= bit;
    }
    q->count++;
    return 0;
}

/* As aq_pop. The new records up to the next one have ranks at most its own; those of its rank go
 * before its run's records, in list order. */
HOT int ra_pop(RAstra *q) {
    RNode *nd = q->nodes;
    int f = q->head, j = low_bit(q->mask);
    ring_pop_front(&q->runs[j]);  /* the front is the lowest run's first record */
    if (!q->runs[j].len) q->mask &= ~(1ULL << j);
    int stop = -1, srank = MAX_RANKS;
    if (q->mask) { srank = low_bit(q->mask); stop = ring_front(&q->runs[srank]); }
    int item;
    LIST_TAKE_FRONT(q, nd, f, item);
    int max = -1, nt = 0;
    for (int e = q->head; e >= 0 && e != stop; e = nd[e].next) {
        int r = nd[e].rank;
        if (r < max) continue;
        max = r;
        if (r == srank) { q->tmp[nt++] = e; continue; }
        if (ring_push_back(&q->runs[r], e)) return -1;
        q->mask |= 1ULL << r;
    }
    for (int k = nt - 1; k >= 0; k--)
        if (ring_push_front(&q->runs[srank], q->tmp[k])) return -1;
    return item;
}

#endif
