/* What one (size, chunks) makes of a shape, exactly as the cost models' Python does (dse/costs): the
 * chunk sizes (`CostModel.chunking`: the paper's equal float chunks, ASTRA-sim 2.x's and 1.0's integer
 * ones), every plan's phases as combos (`CostModel.phases` with `_make_phase`: bytes in, out, the
 * smallest-first key, bytes sent, FIFO-only), numbered in the order Python meets them (orders, then size
 * classes, then steps), and what Themis' load tracker charges (`ThemisScheduler._charges`, its threshold).
 *
 * Exactness: Python's int / int is correctly rounded, as C's double division is when both operands are
 * exact doubles; so a size of 2^53 bytes or more, or a byte count times (P - 1) that reaches 2^53, is
 * declined (-4) and the point runs in Python. So are byte counts the integer kernels cannot hold
 * (KERNEL_INTS) and astra-sim-1 points beyond its packet-loop budget (KERNEL_STEPS). */
#include "_batch.h"
#include <limits.h>
#include <math.h>

#define EXACT (1LL << 53)
enum { DECLINE = -4, SHORT_PREFIX = -5 };

void derived_free(Derived *d) {
    free(d->chunk_sc); free(d->combo_dim); free(d->combo_kind); free(d->plan_off); free(d->plan_combo);
    free(d->hash); free(d->combo_fifo); free(d->combo_tied); free(d->combo_key); free(d->combo_sent);
    free(d->combo_cf); free(d->ch_num); free(d->ch_fac); free(d->combo_c); free(d->ch_dim);
    memset(d, 0, sizeof *d);
    d->size = -1;
}

/* The chunk sizes: nchunks, and the size classes sc (in the order of the chunks) with chunk_sc. */
static int chunking(const Shape *sh, Derived *d, long long size, long long chunks, double *sc) {
    long long r = size / chunks, total = size, n, rest = 0;
    if (size >= EXACT) return DECLINE;
    if (sh->kernel == K_PAPER) {
        n = chunks;
        sc[0] = (double)size / (double)chunks;
    } else {
        if (sh->kernel == K_ASTRA && sh->coll != AG && sh->coll != A2A && sh->npus > r) {
            r = sh->npus;
            if (chunks > EXACT / r) return DECLINE;
            total = chunks * r;
        }
        if (sh->kernel == K_ASTRA && sh->baseline) n = (total + r - 1) / r;
        else { n = total / r; rest = total % r; n += rest > 0; }
        sc[0] = (double)r; sc[1] = (double)rest;
        d->greedy_r = r;
    }
    if (n > INT_MAX / 2) return DECLINE;
    d->nchunks = (int)n;
    d->nsc = rest > 0 ? 2 : 1;
    if (grow((void **)&d->chunk_sc, &d->cap_chunk, d->nchunks, sizeof(int))) return -1;
    for (int k = 0; k < d->nchunks; k++) d->chunk_sc[k] = 0;
    if (rest > 0) d->chunk_sc[d->nchunks - 1] = 1;
    return 0;
}

static unsigned long long mix(unsigned long long x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

/* The bits of a combo's bytes in: the double (paper) or the integer. */
static unsigned long long cbits(const Shape *sh, double cf, long long c) {
    unsigned long long u;
    if (sh->kernel != K_PAPER) return (unsigned long long)c;
    memcpy(&u, &cf, sizeof u);
    return u;
}

/* A new combo k: phase `kind` on dim dd with cf (paper) or c bytes in; its bytes out into *cf_out, *c_out. */
static int combo_new(const Shape *sh, Derived *d, int k, int dd, int kind, double cf, long long c, double *cf_out,
                     long long *c_out) {
    long long p = sh->dim_p[dd];
    d->combo_dim[k] = dd; d->combo_kind[k] = kind; d->combo_cf[k] = cf; d->combo_c[k] = c;
    d->combo_fifo[k] = (unsigned char)(kind == AR || (kind == A2A && sh->fifo_a2a));
    d->combo_tied[k] = (unsigned char)sh->tied;
    if (sh->kernel == K_PAPER) {
        double out = kind == RS ? cf / (double)p : kind == AG ? cf * (double)p : cf;
        d->combo_key[k] = out > cf ? out : cf;
        d->combo_sent[k] = kind == AG ? cf * (double)(p - 1) : kind == AR ? 2 * cf * (double)(p - 1) / (double)p
                                                                           : cf * (double)(p - 1) / (double)p;
        *cf_out = out;
        return 0;
    }
    if (c >= KERNEL_INTS || (kind == AG && c > (KERNEL_INTS - 1) / p)) return DECLINE;
    long long out = kind == RS ? c / p : kind == AG ? c * p : c;
    long long num = kind == AG ? c * (p - 1) : kind == AR ? 2 * c * (p - 1) : c * (p - 1);
    if (c > EXACT / (2 * p) || num >= EXACT || out >= EXACT) return DECLINE;
    d->combo_key[k] = (double)(out > c ? out : c);
    d->combo_sent[k] = kind == AG ? (double)num : (double)num / (double)p;
    if (sh->kernel == K_ASTRA1 && sh->dim_algo[dd] != A_DIRECT && kind != A2A) d->ksteps += 2 * p + 64;
    *c_out = out;
    return 0;
}

/* The combo of (dim, kind, bytes in), made if new; its index, or a negative code. Bytes out: cf, c. */
static int combo_of(const Shape *sh, Derived *d, int dd, int kind, double *cf, long long *c) {
    unsigned long long bits = cbits(sh, *cf, *c), h = mix(bits ^ (unsigned long long)(dd * 4 + kind) << 56);
    int mask = d->hash_cap - 1, at = (int)(h & (unsigned long long)mask);
    for (;; at = (at + 1) & mask) {
        int k = d->hash[at] - 1;
        if (k < 0) break;
        if (d->combo_dim[k] == dd && d->combo_kind[k] == kind && cbits(sh, d->combo_cf[k], d->combo_c[k]) == bits) {
            long long p = sh->dim_p[dd];  /* its bytes out, as combo_new made them */
            if (sh->kernel == K_PAPER) *cf = kind == RS ? *cf / (double)p : kind == AG ? *cf * (double)p : *cf;
            else *c = kind == RS ? *c / p : kind == AG ? *c * p : *c;
            return k;
        }
    }
    int k = d->ncombo++;
    d->hash[at] = k + 1;
    double cf_out = *cf;
    long long c_out = *c;
    int rc = combo_new(sh, d, k, dd, kind, *cf, *c, &cf_out, &c_out);
    *cf = cf_out; *c = c_out;
    return rc ? rc : k;
}

static int combo_room(const Shape *sh, Derived *d) {
    Py_ssize_t most = sh->nstep * d->nsc, cap = d->cap_combo, c2;
    int hc = 16;
    while (hc < 2 * most) hc *= 2;
    if (hc > d->hash_cap) {
        free(d->hash);
        d->hash = malloc((size_t)hc * sizeof(int));
        if (!d->hash) { d->hash_cap = 0; return -1; }
        d->hash_cap = hc;
    }
    memset(d->hash, 0, (size_t)d->hash_cap * sizeof(int));
    if (most <= cap) return 0;
    c2 = cap;
    if (grow((void **)&d->combo_dim, &c2, most, sizeof(int))) return -1;
    c2 = cap; if (grow((void **)&d->combo_kind, &c2, most, sizeof(int))) return -1;
    c2 = cap; if (grow((void **)&d->combo_fifo, &c2, most, 1)) return -1;
    c2 = cap; if (grow((void **)&d->combo_tied, &c2, most, 1)) return -1;
    c2 = cap; if (grow((void **)&d->combo_key, &c2, most, sizeof(double))) return -1;
    c2 = cap; if (grow((void **)&d->combo_sent, &c2, most, sizeof(double))) return -1;
    c2 = cap; if (grow((void **)&d->combo_cf, &c2, most, sizeof(double))) return -1;
    c2 = cap; if (grow((void **)&d->combo_c, &c2, most, sizeof(long long))) return -1;
    c2 = cap; if (grow((void **)&d->plan_combo, &c2, most, sizeof(int))) return -1;
    d->cap_combo = c2;
    return 0;
}

/* Every plan (order, size class): its phases as combos; plan o * nsc + s. */
static int plans(const Shape *sh, Derived *d, const double *sc) {
    int nplan = sh->norder * d->nsc, j = 0;
    Py_ssize_t cap = d->cap_plan;
    if (combo_room(sh, d)) return -1;
    if (grow((void **)&d->plan_off, &cap, nplan + 1, sizeof(int))) return -1;
    d->cap_plan = cap;
    d->ncombo = 0; d->ksteps = 0;
    d->plan_off[0] = 0;
    for (int o = 0; o < sh->norder; o++)
        for (int s = 0; s < d->nsc; s++) {
            double cf = sc[s];
            long long c = (long long)sc[s];
            if (sh->ag_div) cf = cf / (double)sh->npus;  /* the paper's all-gather: chunk / NPUs */
            for (int k = sh->step_off[o]; k < sh->step_off[o + 1]; k++) {
                int id = combo_of(sh, d, sh->step_dim[k], sh->step_kind[k], &cf, &c);
                if (id < 0) return id;
                d->plan_combo[j++] = id;
            }
            d->plan_off[o * d->nsc + s + 1] = j;
        }
    return sh->kernel == K_ASTRA1 && d->ksteps > KERNEL_STEPS ? DECLINE : 0;
}

/* The load tracker's charges: per order, per step of it the dim, factor and numerator (at the one
 * charge size, the chunk size); and per dim the threshold's numerator. */
static int charges(const Shape *sh, Derived *d, double charge) {
    int nd = sh->nd, n = sh->norder * nd;
    Py_ssize_t cap = d->cap_ch, c2 = cap;
    if (grow((void **)&d->ch_num, &c2, n, sizeof(double))) return -1;
    c2 = cap; if (grow((void **)&d->ch_fac, &c2, n, sizeof(double))) return -1;
    c2 = cap; if (grow((void **)&d->ch_dim, &c2, n, sizeof(int))) return -1;
    d->cap_ch = c2;
    for (int o = 0; o < sh->norder; o++) {
        double c = sh->ag_div && sh->coll == AG ? charge / (double)sh->npus : charge;
        for (int i = 0; i < nd; i++) {
            int dd = sh->perm[o * nd + i], j = o * nd + i;
            double p = (double)sh->dim_p[dd];
            d->ch_dim[j] = dd;
            if (sh->coll == AG) { d->ch_num[j] = c * (p - 1); d->ch_fac[j] = 1.0; c = c * p; }
            else { d->ch_num[j] = c * (p - 1) / p; d->ch_fac[j] = sh->coll == AR ? 2.0 : 1.0; c = c / p; }
        }
    }
    for (int dd = 0; dd < nd; dd++) {
        double x = charge * sh->thr_frac, p = (double)sh->dim_p[dd];
        d->thr_num[dd] = x * (p - 1) / p;
    }
    return 0;
}

int derive(const Shape *sh, Derived *d, long long size, long long chunks) {
    if (d->size == size && d->chunks == chunks) return 0;
    double sc[2] = {0.0, 0.0};
    d->size = -1;
    int rc = chunking(sh, d, size, chunks, sc);
    if (!rc && sh->tracker == NO_TRACKER && d->nchunks > sh->nprefix) rc = SHORT_PREFIX;
    if (!rc) rc = plans(sh, d, sc);
    if (!rc && sh->tracker == LOAD_TRACKER) rc = charges(sh, d, sc[0]);
    if (rc) return rc;
    d->size = size; d->chunks = chunks;
    return 0;
}
