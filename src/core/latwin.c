/* A latency trigger's window over one engine pod: a ring of per-scrape histograms (latwin.h). */
#include "core/latwin.h"

#include <stdlib.h>
#include <string.h>

#include "core/err.h"

/* The latency signals, each once (engine_signal_latency >= 0). */
static const enum engine_signal lat_signals[] = {
    ES_VLLM_TTFT,  ES_VLLM_QUEUE_TIME, ES_VLLM_ITL,       ES_SGLANG_TTFT, ES_SGLANG_QUEUE_TIME,
    ES_SGLANG_ITL, ES_TGI_TTFT,        ES_TGI_QUEUE_TIME, ES_TRITON_TTFT};
#define N_LAT (sizeof lat_signals / sizeof *lat_signals)

void latwin_free(struct latwin *w) {
  for (int f = 0; f < ENGINE_LAT_FAMILIES; f++)
    free(w->fam[f].cnt);
  memset(w, 0, sizeof *w);
}

/* Whether r has family f's window histogram (a latency signal of f present, with its buckets). */
static bool has_family(const struct engine_reading *r, int f) {
  if (!r->lat[f].n)
    return false;
  for (size_t i = 0; i < N_LAT; i++)
    if (engine_signal_latency(lat_signals[i]) == f && engine_has(r, lat_signals[i]))
      return true;
  return false;
}

bool latwin_wanted(const struct engine_reading *r) {
  for (size_t i = 0; i < N_LAT; i++)
    if (engine_signal_kind(lat_signals[i]) == r->kind)
      return true;
  return false;
}

static bool same_bounds(const struct latwin_fam *fm, const struct latency_hist *h) {
  return fm->n == h->n && memcmp(fm->le, h->le, h->n * sizeof *h->le) == 0;
}

/* Family f takes h's bounds and forgets its earlier deltas. */
static int restart(struct latwin *w, int f, const struct latency_hist *h) {
  struct latwin_fam *fm = &w->fam[f];
  if (fm->n != h->n || !fm->cnt) {
    double *c = malloc((size_t)LATWIN_ENTRIES * h->n * sizeof *c);
    if (!c)
      return GS_ENOMEM;
    free(fm->cnt);
    fm->cnt = c;
  }
  fm->n = h->n;
  memcpy(fm->le, h->le, h->n * sizeof *h->le);
  for (uint32_t i = 0; i < LATWIN_ENTRIES; i++)
    w->has[i] &= (uint8_t) ~(1u << f);
  return 0;
}

int latwin_push(struct latwin *w, const struct engine_reading *r) {
  if (r->ts_ms <= 0 || (w->len && r->ts_ms <= w->last_ts))
    return 0; /* not scraped yet, or a reading sent again */
  uint8_t bits = 0;
  for (int f = 0; f < ENGINE_LAT_FAMILIES; f++) {
    if (!has_family(r, f) || latency_check(&r->lat[f], NULL, 0))
      continue;
    if (!same_bounds(&w->fam[f], &r->lat[f]) && restart(w, f, &r->lat[f]))
      return GS_ENOMEM;
    bits |= (uint8_t)(1u << f);
  }
  uint32_t at = w->head;
  w->ts[at] = r->ts_ms;
  w->has[at] = bits;
  for (int f = 0; f < ENGINE_LAT_FAMILIES; f++)
    if (bits & (1u << f))
      memcpy(w->fam[f].cnt + (size_t)at * w->fam[f].n, r->lat[f].cum,
             w->fam[f].n * sizeof *r->lat[f].cum);
  w->head = (w->head + 1) % LATWIN_ENTRIES;
  if (w->len < LATWIN_ENTRIES)
    w->len++;
  w->last_ts = r->ts_ms;
  return 0;
}

uint32_t latwin_sum(const struct latwin *w, int f, int64_t window_ms, int64_t end_ms,
                    struct latency_hist *out) {
  memset(out, 0, sizeof *out);
  const struct latwin_fam *fm = &w->fam[f];
  uint32_t k = 0;
  if (f < 0 || f >= ENGINE_LAT_FAMILIES || !fm->n)
    return 0;
  for (uint32_t j = 0; j < w->len; j++) {
    uint32_t at = (w->head + LATWIN_ENTRIES - 1 - j) % LATWIN_ENTRIES;
    if (w->ts[at] <= end_ms - window_ms)
      break; /* newest first: the rest are older */
    if (w->ts[at] > end_ms || !(w->has[at] & (1u << f)))
      continue;
    if (!k) {
      out->n = fm->n;
      memcpy(out->le, fm->le, fm->n * sizeof *fm->le);
    }
    const double *row = fm->cnt + (size_t)at * fm->n;
    for (uint32_t i = 0; i < fm->n; i++)
      out->cum[i] += row[i];
    k++;
  }
  return k;
}

void latwin_apply(const struct latwin *w, int64_t window_ms, struct engine_reading *r) {
  if (window_ms <= 0 || r->ts_ms <= 0)
    return;
  for (size_t i = 0; i < N_LAT; i++) {
    enum engine_signal s = lat_signals[i];
    if (engine_signal_kind(s) != r->kind)
      continue;
    int f = engine_signal_latency(s);
    struct latency_hist sum;
    if (!latwin_sum(w, f, window_ms, r->ts_ms, &sum) || !(latency_count(&sum) > 0))
      continue; /* nothing finished in the window: the newest scrape's rule stands */
    r->lat[f] = sum;
    r->v[s] = latency_count(&sum);
    r->valid |= ES_BIT(s);
  }
}
