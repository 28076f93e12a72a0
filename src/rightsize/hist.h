/* Fixed-bin histograms: the bounded-memory quantiles of rightsize's analysis (utilisation, memory,
 * power), one per GPU and workload quantity, whatever the window. */
#ifndef GS_RS_HIST_H
#define GS_RS_HIST_H

#include <stdbool.h>
#include <stdint.h>

#include "rightsize/model.h"

/* Histogram layouts. Utilisation and memory percent use 0.1 % bins and report a bin's lower edge
 * (exact for DCGM's integer percent); memory uses 64 MiB and power 5 W bins and report a bin's
 * upper edge capped at the exact max (never under the truth). */
#define H_PCT_BINS 1001
#define H_PCT_W 0.1
#define H_MEM_BINS 3072 /* 192 GiB */
#define H_MEM_W 64.0
#define H_POW_BINS 400 /* 2000 W */
#define H_POW_W 5.0

/* A histogram: nbins bins of `width` from 0; the last bin also holds everything above. Counts are
 * kept in 8 bits, in pages of RS_HIST_PAGE bins allocated when a sample first falls in them, all
 * in one block behind a byte per page; a bin whose count passes 255 keeps the rest (count / 256)
 * in a short list sorted by bin. Exact whatever the counts: the readings of a GPU fill a few pages
 * (64 bytes each), where 32-bit counters in pages of their own took four to five times as much,
 * which was most of the analyser's memory on a large fleet. */
#define RS_HIST_PAGE 64
#define RS_HIST_BINS_MAX (255 * RS_HIST_PAGE)
struct rs_hist_hi {
  uint16_t bin;
  uint32_t hi; /* count / 256 */
};
struct rs_hist {
  uint8_t *blk; /* the page index (one byte per page: 0 none, else slot + 1; or, with at most 4
                 * pages of more than 4, their numbers in 4 bytes), then the pages */
  struct rs_hist_hi *ovf; /* the bins that passed 255, by bin */
  uint16_t nbins, n_ovf;  /* the high list holds room for rs_hist_ovf_cap(n_ovf) entries */
  uint8_t npages, used;   /* pages in the index; pages allocated */
  bool upper;             /* report the upper edge (capped at max) */
  bool oom; /* a page could not be allocated: the histogram is incomplete, never to be used */
  double width;
  uint64_t n;
  double sum, max;
};

/* An empty histogram (nothing allocated until the first sample). Returns 0, or GS_EINVAL when nbins
 * is 0 or over RS_HIST_BINS_MAX. Free with rs_hist_free. */
int rs_hist_init(struct rs_hist *h, unsigned nbins, double width, bool upper);
/* Frees the pages; a zeroed struct is fine, and so is NULL. */
void rs_hist_free(struct rs_hist *h);
/* Counts one sample (negative as 0; NaN and infinities ignored). When its page cannot be
 * allocated, h->oom is set and nothing is counted: whoever reads h checks oom first. */
void rs_hist_add(struct rs_hist *h, double v);
/* A step's maximum (max_over_time) that is not a sample of the distribution: it raises max only. */
void rs_hist_peak(struct rs_hist *h, double v);
/* dst becomes a copy of src (its pages and high list of its own): the same state, so that the
 * same samples added to either leave them equal. Returns 0 or GS_ENOMEM (dst then empty). */
int rs_hist_copy(struct rs_hist *dst, const struct rs_hist *src);
/* Adds src's bins, count, sum and max into dst (same layout); dst->oom as rs_hist_add. */
void rs_hist_merge(struct rs_hist *dst, const struct rs_hist *src);
/* The count of bin i (0 beyond the last). */
uint32_t rs_hist_bin(const struct rs_hist *h, unsigned i);
/* Copies the first n bins (zeros where no page is) into out. */
void rs_hist_bins(const struct rs_hist *h, uint32_t *out, unsigned n);
/* The q-quantile: the lower (or, with upper, the upper) edge of its bin, never above max. */
double rs_hist_quantile(const struct rs_hist *h, double q);
/* Fills d (p50, p95, max, mean); every bit clear when the histogram is empty. */
void rs_hist_dist(const struct rs_hist *h, struct rs_dist *d);

#endif
