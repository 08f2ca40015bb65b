/* The smallest-first queues of the C engine, O(distinct keys) per operation whatever the chunk count.
 *
 * dse's rule (SCF_PRIORITY): serve the smallest key, ties by arrival. Buckets of equal keys in
 * ascending key order, each first-in-first-out.
 *
 * ASTRA-sim's rule (SCF_ASTRA): a phase goes before the first waiting phase whose key is >= its own,
 * or to the back; the front is served. The sequence is a linked list; the first element with key
 * >= k is the first "record" (an element whose key is >= every key before it) with key >= k, and
 * the records' keys do not decrease along the list, so they are kept in runs of equal keys (one
 * per distinct key, in order), each run the list of its records. An insertion before the first
 * record >= k is itself a record; an element put at the back is one if its key is >= the last
 * run's. Serving the front (always a record) makes the elements up to the next record records
 * when their key is >= every key before them from the new front; each element is looked at so at
 * most once per distinct key above its own. The Python reference (dse/sim/engine_ref.py) scans a list;
 * the order served is the same.
 *
 * A fixed service order (FIXED_SEQ), at the end: each dim serves a given sequence of chunks. */
#include "_engine.h"
#include "_ranked.h"

/* A full ring's room: twice the capacity (8 at first). */
int ring_grow(Ring *r) {
    int nc = r->cap ? 2 * r->cap : 8;
    int *nb = malloc((size_t)nc * sizeof(int));
    if (!nb) return -1;
    for (int k = 0; k < r->len; k++) nb[k] = r->buf[(r->head + k) & (r->cap - 1)];
    free(r->buf);
    r->buf = nb; r->cap = nc; r->head = 0;
    return 0;
}

/* Room for one more node of a ranked ASTRA-sim list (and its scratch). */
int rnode_grow(RAstra *q) {
    int nc = q->capn ? 2 * q->capn : 16;
    RNode *nb = realloc(q->nodes, (size_t)nc * sizeof(RNode));
    if (nb) q->nodes = nb;
    int *nt = realloc(q->tmp, (size_t)nc * sizeof(int));
    if (nt) q->tmp = nt;
    if (!nb || !nt) return -1;
    q->capn = q->tmpcap = nc;
    return 0;
}

/* ----- dse's rule: buckets -------------------------------------------------------------------- */
int bq_push(Buckets *q, double key, int item) {
    if (q->last < q->n && q->b[q->last].key == key) {  /* keys repeat: the bucket used last */
        if (ring_push_back(&q->b[q->last].r, item)) return -1;
        if (q->last < q->first) q->first = q->last;
        q->count++;
        return 0;
    }
    int lo = 0, hi = q->n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (q->b[mid].key < key) lo = mid + 1; else hi = mid;
    }
    if (lo == q->n || q->b[lo].key != key) {
        if (q->n == q->cap) {
            int nc = q->cap ? 2 * q->cap : 8;
            KRing *nb = realloc(q->b, (size_t)nc * sizeof(KRing));
            if (!nb) return -1;
            q->b = nb; q->cap = nc;
        }
        memmove(&q->b[lo + 1], &q->b[lo], (size_t)(q->n - lo) * sizeof(KRing));
        memset(&q->b[lo], 0, sizeof(KRing));
        q->b[lo].key = key;
        q->n++;
        if (lo <= q->first && q->count) q->first++;  /* the first non-empty bucket moved up one */
    }
    if (ring_push_back(&q->b[lo].r, item)) return -1;
    q->last = lo;
    if (!q->count || lo < q->first) q->first = lo;
    q->count++;
    return 0;
}

int bq_pop(Buckets *q) {
    int k = q->first;  /* every bucket below it is empty */
    while (q->b[k].r.len == 0) k++;
    q->first = k;
    q->count--;
    return ring_pop_front(&q->b[k].r);
}

void bq_clear(Buckets *q) {
    for (int k = 0; k < q->n; k++) q->b[k].r.len = 0, q->b[k].r.head = 0;
    q->count = 0;
    q->first = 0;
}

void bq_free(Buckets *q) {
    for (int k = 0; k < q->n; k++) free(q->b[k].r.buf);
    free(q->b);
    memset(q, 0, sizeof *q);
}

/* ----- ASTRA-sim's rule: a list with runs of records ------------------------------------------ */
static int node_new(Astra *q, double key, int item) {
    int i;
    if (q->freelist >= 0) {
        i = q->freelist;
        q->nodes[i].next = -2;
        q->freelist = q->nodes[i].prev;
    } else {
        if (q->nn == q->capn) {
            int nc = q->capn ? 2 * q->capn : 16;
            QNode *nb = realloc(q->nodes, (size_t)nc * sizeof(QNode));
            if (!nb) return -1;
            q->nodes = nb; q->capn = nc;
        }
        i = q->nn++;
    }
    q->nodes[i].key = key; q->nodes[i].item = item;
    return i;
}

/* A new run of `key` at index j of the runs (its ring reused from a spare one). */
static int run_insert(Astra *q, int j, double key) {
    if (q->nr == q->capr) {
        int nc = q->capr ? 2 * q->capr : 8;
        KRing *nb = realloc(q->runs, (size_t)nc * sizeof(KRing));
        if (!nb) return -1;
        for (int k = q->capr; k < nc; k++) memset(&nb[k], 0, sizeof(KRing));
        q->runs = nb; q->capr = nc;
    }
    KRing spare = q->runs[q->nr];  /* the slot past the end holds a spare ring (or none) */
    memmove(&q->runs[j + 1], &q->runs[j], (size_t)(q->nr - j) * sizeof(KRing));
    q->runs[j] = spare;
    q->runs[j].key = key; q->runs[j].r.len = 0; q->runs[j].r.head = 0;
    q->nr++;
    return 0;
}

static void run_remove_first(Astra *q) {
    KRing gone = q->runs[0];
    memmove(&q->runs[0], &q->runs[1], (size_t)(q->nr - 1) * sizeof(KRing));
    q->nr--;
    q->runs[q->nr] = gone;  /* kept as the spare */
}

static void link_before(Astra *q, int i, int x) {  /* x = -1: at the back */
    int p = x >= 0 ? q->nodes[x].prev : q->tail;
    q->nodes[i].prev = p; q->nodes[i].next = x;
    if (p >= 0) q->nodes[p].next = i; else q->head = i;
    if (x >= 0) q->nodes[x].prev = i; else q->tail = i;
}

int aq_insert(Astra *q, double key, int item, int back) {
    int i = node_new(q, key, item);
    if (i < 0) return -1;
    if (back) {
        link_before(q, i, -1);
        if (q->nr == 0 || key >= q->runs[q->nr - 1].key) {
            if (q->nr == 0 || key > q->runs[q->nr - 1].key) { if (run_insert(q, q->nr, key)) return -1; }
            if (ring_push_back(&q->runs[q->nr - 1].r, i)) return -1;
        }
    } else {
        int j = 0;
        while (j < q->nr && q->runs[j].key < key) j++;
        if (j == q->nr) {  /* nothing waiting has a key >= this one: the back, a record */
            link_before(q, i, -1);
            if (run_insert(q, j, key) || ring_push_back(&q->runs[j].r, i)) return -1;
        } else {
            link_before(q, i, ring_front(&q->runs[j].r));
            if (q->runs[j].key != key && run_insert(q, j, key)) return -1;
            if (ring_push_front(&q->runs[j].r, i)) return -1;
        }
    }
    q->count++;
    return 0;
}

int aq_pop(Astra *q) {
    int f = q->head;
    QNode *nd = q->nodes;
    ring_pop_front(&q->runs[0].r);  /* the front is the first run's first record */
    if (q->runs[0].r.len == 0) run_remove_first(q);
    int stop = q->nr ? ring_front(&q->runs[0].r) : -1;
    int item;
    LIST_TAKE_FRONT(q, nd, f, item);
    /* the elements up to the next record: records from the new front on, new runs before the others */
    int j = 0;
    double max = 0.0;
    int first = 1;
    for (int e = q->head; e >= 0 && e != stop; e = nd[e].next) {
        if (first || nd[e].key >= max) {
            if (first || nd[e].key > max) {
                if (run_insert(q, j, nd[e].key)) return -1;
                j++;
            }
            if (ring_push_back(&q->runs[j - 1].r, e)) return -1;
            max = nd[e].key;
            first = 0;
        }
    }
    return item;
}

void aq_clear(Astra *q) {
    for (int k = 0; k < q->capr; k++) q->runs[k].r.len = 0, q->runs[k].r.head = 0;
    q->nr = 0; q->nn = 0; q->freelist = -1; q->head = q->tail = -1; q->count = 0;
}

void aq_free(Astra *q) {
    for (int k = 0; k < q->capr; k++) free(q->runs[k].r.buf);
    free(q->runs); free(q->nodes);
    memset(q, 0, sizeof *q);
    q->freelist = -1; q->head = q->tail = -1;
}

void rq_clear(RBuckets *b, RAstra *a) {
    for (int k = 0; k < MAX_RANKS && (b->count || a->count); k++) {  /* a run ends with both empty */
        if (b->r) b->r[k].len = b->r[k].head = 0;
        if (a->runs) a->runs[k].len = a->runs[k].head = 0;
    }
    b->mask = a->mask = 0; b->count = a->count = 0;
    a->nn = 0; a->freelist = -1; a->head = a->tail = -1;
}

void rq_free(RBuckets *b, RAstra *a) {
    for (int k = 0; k < MAX_RANKS; k++) {
        if (b->r) free(b->r[k].buf);
        if (a->runs) free(a->runs[k].buf);
    }
    free(b->r); free(a->runs); free(a->nodes); free(a->tmp);
    memset(b, 0, sizeof *b); memset(a, 0, sizeof *a);
}

/* ----- a fixed service order (FIXED_SEQ) -------------------------------------------------------
 * Dim d serves the chunks of its sequence in that order: its next entry's chunk is served once its
 * phase waits there (enqueue sets fat[c] = d); until then the dim idles, whatever else waits. */
int fq_ready(const Sim *s, int d) {
    Py_ssize_t k = s->foff[d] + s->fnext[d];
    if (k >= s->foff[d + 1]) return 0;
    int c = s->fseq[k];
    return c < s->nchunks && s->fat[c] == d;
}

/* Take dim d's next entry (fq_ready said it waits). */
int fq_take(Sim *s, int d) {
    int c = s->fseq[s->foff[d] + s->fnext[d]];
    s->fnext[d] += 1;
    s->fat[c] = -1;
    return c;
}

/* After the run: 1 if the order was not followed to its end, (dim, entry, chunk) in s->stall: the
 * first chunk left waiting at a dim whose sequence has no entry left (entry: the sequence's length),
 * else the first dim stopped short of its sequence's end. */
int fq_stalled(Sim *s) {
    for (Py_ssize_t c = 0; c < s->nchunks; c++) {
        int d = s->fat[c];
        if (d >= 0 && s->foff[d] + s->fnext[d] == s->foff[d + 1]) {
            s->stall[0] = d; s->stall[1] = s->fnext[d]; s->stall[2] = c;
            return 1;
        }
    }
    for (int d = 0; d < s->nd; d++) {
        Py_ssize_t k = s->foff[d] + s->fnext[d];
        if (k < s->foff[d + 1]) {
            s->stall[0] = d; s->stall[1] = s->fnext[d]; s->stall[2] = s->fseq[k];
            return 1;
        }
    }
    return 0;
}
