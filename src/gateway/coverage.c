/* Remembers each trigger's last answer so /metrics and logs always show coverage. */
#include "gateway/coverage.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "core/timeutil.h"
#include "http/exposition.h"

struct coverage_entry {
  char ns[64];
  char name[254];
  char metric[TRIGGER_NAME_LEN];
  bool ok;         /* last answer was a value (else an error) */
  int code;        /* GS_E* of the last error; 0 when ok */
  double value;    /* last value when ok */
  bool has_cov;    /* the last answer carried coverage (values and coverage errors do) */
  double coverage; /* fresh / (selected + the unknown's share) */
  size_t selected, fresh, unknown;
  bool partial, empty;
  int64_t updated_ms;
};

struct coverage {
  pthread_mutex_t lock;
  struct coverage_entry *e;
  size_t n;
};

struct coverage *coverage_new(void) {
  struct coverage *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  c->e = calloc(COVERAGE_MAX_ENTRIES, sizeof *c->e);
  if (!c->e) {
    free(c);
    return NULL;
  }
  pthread_mutex_init(&c->lock, NULL);
  return c;
}

void coverage_free(struct coverage *c) {
  if (!c)
    return;
  pthread_mutex_destroy(&c->lock);
  free(c->e);
  free(c);
}

/* The entry for (ns, name, metric): found, or a new one, or the least recently updated. */
static struct coverage_entry *slot(struct coverage *c, const char *ns, const char *name,
                                   const char *metric, bool *fresh_slot) {
  size_t oldest = 0;
  for (size_t i = 0; i < c->n; i++) {
    if (!strcmp(c->e[i].ns, ns) && !strcmp(c->e[i].name, name) && !strcmp(c->e[i].metric, metric))
      return &c->e[i];
    if (c->e[i].updated_ms < c->e[oldest].updated_ms)
      oldest = i;
  }
  *fresh_slot = true;
  struct coverage_entry *s = c->n < COVERAGE_MAX_ENTRIES ? &c->e[c->n++] : &c->e[oldest];
  memset(s, 0, sizeof *s);
  snprintf(s->ns, sizeof s->ns, "%s", ns);
  snprintf(s->name, sizeof s->name, "%s", name);
  snprintf(s->metric, sizeof s->metric, "%s", metric);
  return s;
}

void coverage_record(void *ud, const struct scaler_request *req, const char *metric_name,
                     const struct scaler_result *res, const struct scaler_error *e) {
  struct coverage *c = ud;
  if (!c || (!res && !e))
    return;
  const char *metric = res ? res->metric_name : metric_name;
  pthread_mutex_lock(&c->lock);
  bool created = false;
  struct coverage_entry *s = slot(c, req->ns, req->name, metric, &created);
  struct coverage_entry was = *s;
  s->updated_ms = time_mono_ms();
  if (res) {
    s->ok = true;
    s->code = 0;
    s->value = res->value;
    s->has_cov = true;
    s->coverage = res->coverage;
    s->selected = res->selected;
    s->fresh = res->fresh;
    s->unknown = res->unknown;
    s->partial = res->partial;
    s->empty = res->empty_selection;
  } else {
    s->ok = false;
    s->code = e->code;
    s->partial = s->empty = false;
    /* An error without coverage (bad metadata, an absent GPU) says nothing about coverage: the
     * series goes away rather than keep an older answer's number. */
    s->has_cov = e->has_coverage;
    s->coverage = e->has_coverage ? e->coverage : 0;
    s->selected = e->has_coverage ? e->selected : 0;
    s->fresh = e->has_coverage ? e->fresh : 0;
    s->unknown = e->has_coverage ? e->unknown : 0;
  }
  bool changed = created || was.ok != s->ok || was.code != s->code || was.partial != s->partial ||
                 was.empty != s->empty || was.has_cov != s->has_cov ||
                 was.coverage != s->coverage || was.unknown != s->unknown;
  struct coverage_entry copy = *s;
  pthread_mutex_unlock(&c->lock);
  if (!changed)
    return;
  if (copy.ok && copy.empty)
    LOG_INFO("gateway",
             "%s/%s %s: every agent is known and nothing is selected (no pod holds a selected GPU, "
             "or no engine pod matches): answering 0",
             copy.ns, copy.name, copy.metric);
  else if (copy.ok && copy.partial)
    LOG_WARN("gateway",
             "%s/%s %s: partial value %g from %zu of %zu selected GPUs (engine pods for an engine "
             "signal), %zu agents or nodes "
             "unseen (coverage %.0f%%)",
             copy.ns, copy.name, copy.metric, copy.value, copy.fresh, copy.selected, copy.unknown,
             copy.coverage * 100);
  else if (copy.ok)
    LOG_INFO("gateway", "%s/%s %s: value %g from %zu GPUs or engine pods (coverage 100%%)", copy.ns,
             copy.name, copy.metric, copy.value, copy.selected);
  else if (copy.code == GS_EUNAVAIL)
    LOG_WARN("gateway", "%s/%s %s: UNAVAILABLE: %s", copy.ns, copy.name, copy.metric, e->msg);
  else
    LOG_WARN("gateway", "%s/%s %s: error (%s): %s", copy.ns, copy.name, copy.metric,
             gs_strerror(copy.code), e->msg);
}

int coverage_render(struct coverage *c, struct buf *b) {
  pthread_mutex_lock(&c->lock);
  size_t n = c->n;
  struct coverage_entry *copy = malloc((n ? n : 1) * sizeof *copy);
  if (copy)
    memcpy(copy, c->e, n * sizeof *copy);
  pthread_mutex_unlock(&c->lock);
  if (!copy)
    return GS_ENOMEM;
  static const struct {
    const char *name, *help;
  } fam[] = {
      {"gpuscale_gateway_trigger_coverage",
       "Fresh selected GPUs (engine pods for an engine signal) / everything that should have "
       "been counted (unseen agents and nodes included) at the trigger's last GetMetrics."},
      {"gpuscale_gateway_trigger_value", "Value of the trigger's last successful GetMetrics."},
      {"gpuscale_gateway_trigger_ok", "1 when the trigger's last GetMetrics answered a value."},
      {"gpuscale_gateway_trigger_partial",
       "1 when the last value was aggregated over part of the selection (allowPartial)."},
      {"gpuscale_gateway_trigger_unknown",
       "Agents or nodes the trigger's last GetMetrics could not see (never reported, no pod "
       "attribution for a pod selection, or engine metrics off for an engine signal); each "
       "counts as at least one GPU (engine pod) in coverage."},
  };
  int rc = 0;
  for (size_t f = 0; f < sizeof fam / sizeof fam[0] && !rc; f++) {
    rc = expo_family(b, fam[f].name, "gauge", fam[f].help);
    for (size_t i = 0; i < n && !rc; i++) {
      if ((f == 1 && !copy[i].ok) || ((f == 0 || f == 4) && !copy[i].has_cov))
        continue;
      struct expo_label l[3] = {
          {"namespace", copy[i].ns}, {"scaledobject", copy[i].name}, {"metric", copy[i].metric}};
      double v = f == 0   ? copy[i].coverage
                 : f == 1 ? copy[i].value
                 : f == 2 ? copy[i].ok
                 : f == 3 ? copy[i].partial
                          : (double)copy[i].unknown;
      char txt[64];
      expo_format_double(v, txt, sizeof txt);
      rc = expo_sample(b, fam[f].name, l, 3, txt);
    }
  }
  free(copy);
  return rc;
}
