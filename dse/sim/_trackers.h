/* Themis' trackers in C (_trackers.c), for the compiled path (_batch.c). */
#ifndef DSE_TRACKERS_H
#define DSE_TRACKERS_H

#include "_batch.h"

#ifdef __SIZEOF_INT128__
typedef __int128 big;
#define HAVE_BIG 1
#else
typedef long long big;
#define HAVE_BIG 0
#endif

/* Per order, what one chunk charges each dim at this point (`inc`, made on first use: `seen` stamped
 * with the point's number). */
typedef struct { double *inc; unsigned *seen; unsigned point; } Charges;

/* The orders of dv's chunks into oids: the paper's load tracker at bandwidths bw and latencies lat,
 * and ASTRA-sim's OfflineGreedy at greedy bandwidths bw. */
void load_tracker(const Shape *sh, const Derived *dv, const double *bw, const double *lat, int *oids, Charges *ch);
void offline_greedy(const Shape *sh, const Derived *dv, const double *bw, int *oids);

#endif
