/* Fixed-bin histograms (see hist.h). */
#include "rightsize/hist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

int rs_hist_init(struct rs_hist *h, unsigned nbins, double width, bool upper) {
  memset(h, 0, sizeof(*h));
  h->bins = calloc(nbins, sizeof(*h->bins));
  h->nbins = nbins;
  h->width = width;
  h->upper = upper;
  return h->bins ? 0 : GS_ENOMEM;
}

void rs_hist_free(struct rs_hist *h) {
  free(h->bins);
}

void rs_hist_add(struct rs_hist *h, double v) {
  if (!isfinite(v))
    return;
  if (v < 0)
    v = 0;
  double idx = floor(v / h->width + 1e-9);
  unsigned i = idx >= h->nbins ? h->nbins - 1 : (unsigned)idx;
  h->bins[i]++;
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
  for (unsigned i = 0; i < dst->nbins && i < src->nbins; i++)
    dst->bins[i] += src->bins[i];
  if (src->n && (dst->n == 0 || src->max > dst->max))
    dst->max = src->max;
  dst->n += src->n;
  dst->sum += src->sum;
}

double rs_hist_quantile(const struct rs_hist *h, double q) {
  uint64_t want = (uint64_t)ceil(q * (double)h->n);
  if (want < 1)
    want = 1;
  uint64_t cum = 0;
  for (unsigned i = 0; i < h->nbins; i++) {
    cum += h->bins[i];
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
