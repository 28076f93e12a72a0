/* Lifetime and naming helpers for the rightsize data model (model.h). */
#include "rightsize/model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "rightsize/hist.h"

/* The report's string store: blocks of RS_STRBLK bytes (or one of its own for a longer string),
 * filled in order, newest first in the list. */
#define RS_STRBLK 65536
struct rs_strblk {
  struct rs_strblk *next;
  size_t used, cap;
  char text[];
};

void rs_params_default(struct rs_params *p) {
  memset(p, 0, sizeof(*p));
  p->window_ms = 7LL * 24 * 3600 * 1000;
  p->step_ms = 5LL * 60 * 1000;
  p->min_idle_ms = 2LL * 3600 * 1000;
  p->idle_util_pct = 5.0;
  p->idle_mem_pct = 5.0;
  p->low_util_pct = 30.0;
  p->pack_util_pct = 80.0;
  p->pack_mem_pct = 90.0;
  p->min_coverage = 0.5;
  p->burst_tolerance = 0.01;
  p->drain_min_confidence = 0.15;
  p->drain_min_idle_share = 0.5;
}

void rs_report_init(struct rs_report *r) {
  memset(r, 0, sizeof(*r));
  snprintf(r->schema, sizeof(r->schema), "%s", RS_SCHEMA);
  snprintf(r->currency, sizeof(r->currency), "USD");
  rs_params_default(&r->params);
}

void rs_report_free(struct rs_report *r) {
  if (!r)
    return;
  for (size_t i = 0; i < r->n_gpus; i++) {
    free(r->gpus[i].workloads);
    free(r->gpus[i].gaps);
    free(r->gpus[i].timeline);
  }
  for (size_t i = 0; i < r->n_nodes; i++) {
    free(r->nodes[i].gpus);
    free(r->nodes[i].timeline);
  }
  for (size_t i = 0; i < r->n_workloads; i++) {
    free(r->workloads[i].gpus);
    rs_hist_free(r->workloads[i].util_peaks);
    free(r->workloads[i].util_peaks);
  }
  for (size_t i = 0; i < r->n_recs; i++) {
    free(r->recs[i].workloads);
    free(r->recs[i].nodes);
    free(r->recs[i].gpus);
    free(r->recs[i].slots);
    free(r->recs[i].mates);
  }
  while (r->strs) {
    struct rs_strblk *next = r->strs->next;
    free(r->strs);
    r->strs = next;
  }
  free(r->gpus);
  free(r->nodes);
  free(r->workloads);
  free(r->recs);
  free(r->notes);
  r->gpus = NULL;
  r->nodes = NULL;
  r->workloads = NULL;
  r->recs = NULL;
  r->notes = NULL;
  r->n_gpus = r->n_nodes = r->n_workloads = r->n_recs = r->n_notes = 0;
}

const char *rs_report_str(struct rs_report *r, const char *s, size_t max) {
  if (!s || !s[0] || max <= 1)
    return "";
  size_t n = strnlen(s, max - 1);
  struct rs_strblk *b = r->strs;
  if (!b || b->cap - b->used < n + 1) {
    size_t cap = n + 1 > RS_STRBLK ? n + 1 : RS_STRBLK;
    b = malloc(sizeof(*b) + cap);
    if (!b)
      return NULL;
    b->used = 0;
    b->cap = cap;
    b->next = r->strs;
    r->strs = b;
  }
  char *out = b->text + b->used;
  memcpy(out, s, n);
  out[n] = '\0';
  b->used += n + 1;
  return out;
}

int rs_report_note(struct rs_report *r, const char *fmt, ...) {
  struct rs_note *n = realloc(r->notes, (r->n_notes + 1) * sizeof(*n));
  if (!n)
    return GS_ENOMEM;
  r->notes = n;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(n[r->n_notes].text, sizeof(n[r->n_notes].text), fmt, ap);
  va_end(ap);
  r->n_notes++;
  return 0;
}

const char *rs_rec_kind_name(enum rs_rec_kind k) {
  switch (k) {
  case RS_REC_IDLE_NODE: return "idle_node";
  case RS_REC_CONSOLIDATE: return "consolidate";
  case RS_REC_MIG: return "mig";
  case RS_REC_TIMESLICE: return "timeslice";
  case RS_REC_CHEAPER_GPU: return "cheaper_gpu";
  case RS_REC_WATCH_NODE: return "watch_node";
  case RS_REC_KIND_COUNT: break;
  }
  return "unknown";
}

const char *rs_confidence_name(enum rs_confidence c) {
  switch (c) {
  case RS_CONF_LOW: return "low";
  case RS_CONF_MEDIUM: return "medium";
  case RS_CONF_HIGH: return "high";
  }
  return "low";
}

const char *rs_owner_source_name(enum rs_owner_source s) {
  switch (s) {
  case RS_OWNER_POD: return "pod";
  case RS_OWNER_HEURISTIC: return "heuristic";
  case RS_OWNER_KUBE: return "kubernetes";
  }
  return "pod";
}

const char *rs_price_source_name(enum rs_price_source s) {
  switch (s) {
  case RS_PRICE_NONE: return "none";
  case RS_PRICE_FILE_MODEL: return "file:model";
  case RS_PRICE_FILE_INSTANCE: return "file:instance";
  case RS_PRICE_BUILTIN: return "builtin";
  }
  return "none";
}

enum rs_confidence rs_confidence_level(double score) {
  if (score >= 0.8)
    return RS_CONF_HIGH;
  if (score >= 0.5)
    return RS_CONF_MEDIUM;
  return RS_CONF_LOW;
}

double rs_workload_peak_share(const struct rs_workload *w, double pct) {
  if (!w->util_peaks || w->n_util_peaks == 0)
    return NAN;
  uint64_t over = 0;
  for (unsigned i = 0; i < RS_PEAK_BINS; i++)
    if ((double)i * RS_PEAK_W > pct + 1e-9)
      over += rs_hist_bin(w->util_peaks, i);
  return (double)over / (double)w->n_util_peaks;
}
