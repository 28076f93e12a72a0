/* Fixed-bin histograms (see hist.h). */
#include "rightsize/hist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

static unsigned n_pages(unsigned nbins) {
  return (nbins + RS_HIST_PAGE - 1) / RS_HIST_PAGE;
}

int rs_hist_init(struct rs_hist *h, unsigned nbins, double width, bool upper) {
  memset(h, 0, sizeof(*h));
  h->pages = calloc(n_pages(nbins), sizeof(*h->pages));
  h->nbins = nbins;
  h->width = width;
  h->upper = upper;
  return h->pages ? 0 : GS_ENOMEM;
}

void rs_hist_free(struct rs_hist *h) {
  if (!h)
    return;
  if (h->pages)
    for (unsigned p = 0; p < n_pages(h->nbins); p++)
      free(h->pages[p]);
  free(h->pages);
  h->pages = NULL;
}

/* The bin i's counter, its page allocated if need be; NULL (and oom) when it cannot be. */
static uint32_t *bin_at(struct rs_hist *h, unsigned i) {
  uint32_t **pg = &h->pages[i / RS_HIST_PAGE];
  if (!*pg && !(*pg = calloc(RS_HIST_PAGE, sizeof(**pg)))) {
    h->oom = true;
    return NULL;
  }
  return &(*pg)[i % RS_HIST_PAGE];
}

static uint32_t bin_get(const struct rs_hist *h, unsigned i) {
  const uint32_t *pg = h->pages[i / RS_HIST_PAGE];
  return pg ? pg[i % RS_HIST_PAGE] : 0;
}

void rs_hist_add(struct rs_hist *h, double v) {
  if (!isfinite(v))
    return;
  if (v < 0)
    v = 0;
  double idx = floor(v / h->width + 1e-9);
  unsigned i = idx >= h->nbins ? h->nbins - 1 : (unsigned)idx;
  uint32_t *b = bin_at(h, i);
  if (!b)
    return;
  (*b)++;
  if (h->n == 0 || v > h->max)
    h->max = v;
  h->n++;
  h->sum += v;
}

void rs_hist_peak(struct rs_hist *h, double v) {
  if (!isfinite(v) || !h->n)
    return;
  if (v > h->max)
    h->max = v;
}

void rs_hist_merge(struct rs_hist *dst, const struct rs_hist *src) {
  dst->oom |= src->oom;
  unsigned nb = dst->nbins < src->nbins ? dst->nbins : src->nbins;
  for (unsigned i = 0; i < nb; i++) {
    if (!src->pages[i / RS_HIST_PAGE]) {
      i = (i / RS_HIST_PAGE + 1) * RS_HIST_PAGE - 1; /* a page of zeros adds nothing */
      continue;
    }
    uint32_t c = bin_get(src, i), *d;
    if (c && (d = bin_at(dst, i)) != NULL)
      *d += c;
  }
  if (src->n && (dst->n == 0 || src->max > dst->max))
    dst->max = src->max;
  dst->n += src->n;
  dst->sum += src->sum;
}

uint32_t rs_hist_bin(const struct rs_hist *h, unsigned i) {
  return i < h->nbins ? bin_get(h, i) : 0;
}

void rs_hist_bins(const struct rs_hist *h, uint32_t *out, unsigned n) {
  for (unsigned i = 0; i < n; i++)
    out[i] = i < h->nbins ? bin_get(h, i) : 0;
}

double rs_hist_quantile(const struct rs_hist *h, double q) {
  uint64_t want = (uint64_t)ceil(q * (double)h->n);
  if (want < 1)
    want = 1;
  uint64_t cum = 0;
  for (unsigned i = 0; i < h->nbins; i++) {
    if (!h->pages[i / RS_HIST_PAGE]) {
      i = (i / RS_HIST_PAGE + 1) * RS_HIST_PAGE - 1; /* no count in this page */
      continue;
    }
    cum += bin_get(h, i);
    if (cum >= want) {
      double v = h->upper ? (i + 1) * h->width : i * h->width;
      if (i == h->nbins - 1 || v > h->max)
        v = h->max;
      return v;
    }
  }
  return h->max;
}

void rs_hist_dist(const struct rs_hist *h, struct rs_dist *d) {
  memset(d, 0, sizeof(*d));
  d->n = h->n;
  if (!h->n)
    return;
  d->p50 = rs_hist_quantile(h, 0.50);
  d->p95 = rs_hist_quantile(h, 0.95);
  d->max = h->max;
  d->mean = h->sum / (double)h->n;
  d->valid = RS_HAS_P50 | RS_HAS_P95 | RS_HAS_MAX | RS_HAS_MEAN;
}
