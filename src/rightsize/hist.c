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
  if (nbins == 0 || nbins > RS_HIST_BINS_MAX)
    return GS_EINVAL;
  h->nbins = (uint16_t)nbins;
  h->npages = (uint8_t)n_pages(nbins);
  h->width = width;
  h->upper = upper;
  return 0;
}

void rs_hist_free(struct rs_hist *h) {
  if (!h)
    return;
  free(h->blk);
  free(h->ovf);
  h->blk = NULL;
  h->ovf = NULL;
  h->used = 0;
  h->n_ovf = 0;
}

/* A histogram of more than RS_HIST_FEW pages that has at most RS_HIST_FEW of them lists their
 * numbers in RS_HIST_FEW bytes (slot order) instead of a byte per page: a GPU's memory, which
 * spans 48 pages of 64 MiB, uses one or two. The index is made when a page past RS_HIST_FEW comes.
 */
#define RS_HIST_FEW 4

static bool few(const struct rs_hist *h, unsigned used) {
  return h->npages > RS_HIST_FEW && used <= RS_HIST_FEW;
}

/* The bytes before the pages. */
static size_t head(const struct rs_hist *h, unsigned used) {
  return few(h, used) ? RS_HIST_FEW : h->npages;
}

/* The 8-bit counter of bin i, or NULL when its page is not allocated. */
static uint8_t *lo_at(const struct rs_hist *h, unsigned i) {
  if (!h->blk)
    return NULL;
  unsigned page = i / RS_HIST_PAGE, slot = 0;
  if (few(h, h->used)) {
    for (unsigned s = 0; s < h->used && !slot; s++)
      slot = h->blk[s] == page ? s + 1 : 0;
  } else
    slot = h->blk[page];
  return slot ? h->blk + head(h, h->used) + (size_t)(slot - 1) * RS_HIST_PAGE + i % RS_HIST_PAGE
              : NULL;
}

/* The 8-bit counter of bin i, its page allocated if need be; NULL (and oom) when it cannot be. */
static uint8_t *lo_make(struct rs_hist *h, unsigned i) {
  uint8_t *lo = lo_at(h, i);
  if (lo)
    return lo;
  unsigned used = h->used + 1u, page = i / RS_HIST_PAGE;
  size_t size = head(h, used) + (size_t)used * RS_HIST_PAGE;
  uint8_t *nb;
  if (h->blk && few(h, h->used) && !few(h, used)) { /* the list becomes an index */
    if (!(nb = malloc(size))) {
      h->oom = true;
      return NULL;
    }
    memset(nb, 0, h->npages);
    for (unsigned s = 0; s < h->used; s++)
      nb[h->blk[s]] = (uint8_t)(s + 1);
    memcpy(nb + h->npages, h->blk + RS_HIST_FEW, (size_t)h->used * RS_HIST_PAGE);
    free(h->blk);
  } else {
    if (!(nb = realloc(h->blk, size))) {
      h->oom = true;
      return NULL;
    }
    if (!h->blk)
      memset(nb, 0, head(h, used));
  }
  memset(nb + size - RS_HIST_PAGE, 0, RS_HIST_PAGE);
  h->blk = nb;
  if (few(h, used))
    h->blk[used - 1] = (uint8_t)page;
  else
    h->blk[page] = (uint8_t)used;
  h->used = (uint8_t)used;
  return lo_at(h, i);
}

/* The room of a high list of n entries: 4, 8, 16, ... entries, at most nbins (none for none). */
static unsigned ovf_cap(const struct rs_hist *h, unsigned n) {
  unsigned cap = 4;
  while (cap < n && cap < h->nbins)
    cap *= 2;
  return n ? (cap > h->nbins ? h->nbins : cap) : 0;
}

/* Where bin's entry is in the high list, or where it would go. */
static size_t hi_find(const struct rs_hist *h, unsigned bin) {
  size_t lo = 0, hi = h->n_ovf;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (h->ovf[mid].bin < bin)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static uint32_t hi_get(const struct rs_hist *h, unsigned bin) {
  if (!h->n_ovf)
    return 0;
  size_t j = hi_find(h, bin);
  return j < h->n_ovf && h->ovf[j].bin == bin ? h->ovf[j].hi : 0;
}

/* Adds d to bin's high part; false (and oom) when the list cannot grow. */
static bool hi_add(struct rs_hist *h, unsigned bin, uint32_t d) {
  size_t j = hi_find(h, bin);
  if (j < h->n_ovf && h->ovf[j].bin == bin) {
    h->ovf[j].hi += d;
    return true;
  }
  if (h->n_ovf == ovf_cap(h, h->n_ovf)) { /* full: the next room up */
    struct rs_hist_hi *n = realloc(h->ovf, ovf_cap(h, h->n_ovf + 1u) * sizeof(*n));
    if (!n) {
      h->oom = true;
      return false;
    }
    h->ovf = n;
  }
  memmove(&h->ovf[j + 1], &h->ovf[j], (h->n_ovf - j) * sizeof(*h->ovf));
  h->ovf[j].bin = (uint16_t)bin;
  h->ovf[j].hi = d;
  h->n_ovf++;
  return true;
}

static uint32_t bin_get(const struct rs_hist *h, unsigned i) {
  const uint8_t *lo = lo_at(h, i);
  return lo ? *lo + 256u * hi_get(h, i) : 0;
}

/* Adds c to bin i; false (and oom) when memory fails, with nothing counted. */
static bool bin_add(struct rs_hist *h, unsigned i, uint32_t c) {
  uint8_t *lo = lo_make(h, i);
  if (!lo)
    return false;
  uint32_t t = *lo + (c & 0xffu);
  uint32_t up = (c >> 8) + (t >> 8);
  if (up && !hi_add(h, i, up))
    return false;
  *lo = (uint8_t)(t & 0xffu);
  return true;
}

void rs_hist_add(struct rs_hist *h, double v) {
  if (!isfinite(v))
    return;
  if (v < 0)
    v = 0;
  double idx = floor(v / h->width + 1e-9);
  unsigned i = idx >= h->nbins ? h->nbins - 1u : (unsigned)idx;
  if (!bin_add(h, i, 1))
    return;
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

int rs_hist_copy(struct rs_hist *dst, const struct rs_hist *src) {
  *dst = *src;
  dst->blk = NULL;
  dst->ovf = NULL;
  if (src->blk) {
    size_t size = head(src, src->used) + (size_t)src->used * RS_HIST_PAGE;
    if (!(dst->blk = malloc(size)))
      goto oom;
    memcpy(dst->blk, src->blk, size);
  }
  if (src->ovf) {
    if (!(dst->ovf = malloc(ovf_cap(src, src->n_ovf) * sizeof(*dst->ovf))))
      goto oom;
    memcpy(dst->ovf, src->ovf, src->n_ovf * sizeof(*dst->ovf));
  }
  return 0;
oom:
  free(dst->blk);
  memset(dst, 0, sizeof(*dst));
  return GS_ENOMEM;
}

void rs_hist_merge(struct rs_hist *dst, const struct rs_hist *src) {
  dst->oom |= src->oom;
  unsigned nb = dst->nbins < src->nbins ? dst->nbins : src->nbins;
  for (unsigned i = 0; i < nb; i++) {
    if (!lo_at(src, i)) {
      i = (i / RS_HIST_PAGE + 1) * RS_HIST_PAGE - 1; /* a page of zeros adds nothing */
      continue;
    }
    uint32_t c = bin_get(src, i);
    if (c)
      bin_add(dst, i, c);
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
    if (!lo_at(h, i)) {
      i = (i / RS_HIST_PAGE + 1) * RS_HIST_PAGE - 1; /* no count in this page */
      continue;
    }
    cum += bin_get(h, i);
    if (cum >= want) {
      double v = h->upper ? (i + 1) * h->width : i * h->width;
      if (i == h->nbins - 1u || v > h->max)
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
