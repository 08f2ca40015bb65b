/* Themis' chunk orders in C, exactly as dse/schedulers/themis.py computes them: the paper's load tracker
 * (`ThemisScheduler.track`) and ASTRA-sim's OfflineGreedy (`OfflineGreedy.order`), quirks included. */
#include "_batch.h"
#include "_trackers.h"
#include <math.h>

#define MIB 1048576.0

static int order_id(const Shape *sh, const int *o) {
    int code = 0, m = 1;
    for (int i = 0; i < sh->nd; i++) { code += o[i] * m; m *= sh->nd; }
    return sh->permcode[code];
}

/* ----- the paper's load tracker --------------------------------------------------------------- */
/* What a chunk of order o charges each dim at this point: made on its first use in the point. */
static const double *charge_of(const Shape *sh, const Derived *dv, const double *bw, Charges *ch, int o) {
    int nd = sh->nd;
    double *inc = ch->inc + (Py_ssize_t)o * nd;
    if (ch->seen[o] != ch->point) {
        ch->seen[o] = ch->point;
        for (int j = o * nd; j < (o + 1) * nd; j++) inc[dv->ch_dim[j]] = dv->ch_fac[j] * (dv->ch_num[j] / bw[dv->ch_dim[j]]);
    }
    return inc;
}

/* Sort the dims by load, stably (highest first for a standalone all-gather), into o. */
static void by_load(const Shape *sh, const double *loads, int *o) {
    int hf = sh->coll == AG;
    for (int i = 0; i < sh->nd; i++) {
        int x = i, j = i;
        while (j > 0 && (hf ? loads[o[j - 1]] < loads[x] : loads[o[j - 1]] > loads[x])) { o[j] = o[j - 1]; j--; }
        o[j] = x;
    }
}

void load_tracker(const Shape *sh, const Derived *dv, const double *bw, const double *lat, int *oids, Charges *ch) {
    int nd = sh->nd, o[MAX_ND];
    double loads[MAX_ND];
    if (++ch->point == 0) {  /* the stamps wrapped: none is this point's */
        memset(ch->seen, 0, (size_t)sh->norder * sizeof(unsigned));
        ch->point = 1;
    }
    for (int d = 0; d < nd; d++) loads[d] = sh->seed_latency ? (double)sh->dim_steps[d] * lat[d] : 0.0;
    for (int k = 0; k < dv->nchunks; k++) {
        int idx = 0;
        double lo = loads[0], hi = loads[0];
        for (int d = 1; d < nd; d++) {
            if (loads[d] < lo) { lo = loads[d]; idx = d; }
            if (loads[d] > hi) hi = loads[d];
        }
        int oid = sh->base;
        if (!(hi - lo < dv->thr_num[idx] / bw[idx])) { by_load(sh, loads, o); oid = order_id(sh, o); }
        oids[k] = oid;
        const double *inc = charge_of(sh, dv, bw, ch, oid);
        for (int d = 0; d < nd; d++) loads[d] += inc[d];
    }
}

/* ----- ASTRA-sim's OfflineGreedy --------------------------------------------------------------- */
/* Charges by position: position i gets dims[i]'s volume (0 where skipped), c evolving. */
static void greedy_charge(const Shape *sh, const double *bw, const int *dims, long long r, const int *skip, double *out) {
    if (sh->coll != AG) {  /* the bytes only shrink: 64 bits hold them, and divide faster than 128 */
        long long c = r;
        for (int i = 0; i < sh->nd; i++) {
            int d = dims[i];
            if (skip[i]) { out[i] = 0.0; continue; }
            long long p = sh->dim_p[d];
            out[i] = ((double)c / MIB * ((double)(p - 1) / (double)p)) / (bw[d] / bw[0]);
            c = c / p;
        }
        return;
    }
    big c = r;
    for (int i = 0; i < sh->nd; i++) {
        int d = dims[i];
        if (skip[i]) { out[i] = 0.0; continue; }
        long long p = sh->dim_p[d];
        out[i] = ((double)c / MIB * (double)(p - 1)) / (bw[d] / bw[0]);
        c = c * p;
    }
}

/* Sort the list (dim, load) stably by load; reversed for an all-gather. */
static void greedy_sort(const Shape *sh, int *dim, double *load) {
    int nd = sh->nd;
    for (int i = 1; i < nd; i++) {
        int xd = dim[i], j = i;
        double xl = load[i];
        while (j > 0 && load[j - 1] > xl) { dim[j] = dim[j - 1]; load[j] = load[j - 1]; j--; }
        dim[j] = xd; load[j] = xl;
    }
    if (sh->coll == AG) for (int i = 0; i < nd / 2; i++) {
        int td = dim[i]; dim[i] = dim[nd - 1 - i]; dim[nd - 1 - i] = td;
        double tl = load[i]; load[i] = load[nd - 1 - i]; load[nd - 1 - i] = tl;
    }
}

/* Is the gap below r/16 (the identity order then)? ptr: the first involved position. */
static int greedy_identity(const Shape *sh, const double *bw, const int *dim, const double *load, const int *off,
                           int ptr, long long r) {
    int nd = sh->nd;
    big gap;
    if (sh->coll == AG) {
        int last = nd - 1;
        while (off[last]) last--;
        int dl = dim[last];
        gap = (big)((fabs(load[last] - load[ptr]) * (bw[dl] / bw[0])) / (double)(sh->dim_p[dl] - 1) * MIB);
        for (int j = last - 1; j >= ptr; j--) if (!off[j]) gap /= sh->dim_p[dim[j]];
    } else {
        int df = dim[ptr];
        long long p = sh->dim_p[df];
        gap = (big)((fabs(load[nd - 1] - load[ptr]) * (bw[df] / bw[0])) / ((double)(p - 1) / (double)p) * MIB);
    }
    return gap < (big)(r / 16);
}

void offline_greedy(const Shape *sh, const Derived *dv, const double *bw, int *oids) {
    int nd = sh->nd, dim[MAX_ND], off[MAX_ND], o[MAX_ND], skip[MAX_ND];
    double load[MAX_ND], ch[MAX_ND];
    long long r = dv->greedy_r;
    for (int d = 0; d < nd; d++) { dim[d] = d; load[d] = 0.0; }
    for (int k = 0; k < dv->nchunks; k++) {
        greedy_sort(sh, dim, load);
        int ptr = nd;
        for (int i = 0; i < nd; i++) { off[i] = sh->dim_p[dim[i]] == 1; if (!off[i] && ptr == nd) ptr = i; }
        if (ptr < nd && greedy_identity(sh, bw, dim, load, off, ptr, r)) {
            double byd[MAX_ND];  /* back to dim order (reversed for an all-gather: position i is dim nd-1-i) */
            for (int i = 0; i < nd; i++) byd[dim[i]] = load[i];
            for (int i = 0; i < nd; i++) { o[i] = i; skip[i] = sh->dim_p[i] == 1; }
            for (int i = 0; i < nd; i++) {
                int d = sh->coll == AG ? nd - 1 - i : i;
                dim[i] = d; load[i] = byd[d];
            }
            greedy_charge(sh, bw, o, r, skip, ch);
        } else {
            for (int i = 0; i < nd; i++) o[i] = dim[i];
            greedy_charge(sh, bw, o, r, off, ch);
        }
        for (int i = 0; i < nd; i++) load[i] += ch[i];
        oids[k] = order_id(sh, o);
    }
}
