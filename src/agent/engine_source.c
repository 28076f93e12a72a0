/* Selects this node's engine pods (or the one allowed URL) for an engine trigger, and reports
 * them to the policy as a selection: one value per pod, with what is missing and why. */
#include "agent/engine_source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/latwin.h"

static const char *node_of(const struct engine_source *es) {
  return es->node[0] ? es->node : "this node";
}

/* The one URL of the operator's opt-in: a selection of one "pod". */
static int select_url(struct engine_source *es, const struct trigger *t,
                      struct scaler_selection *sel, char *err, size_t errlen) {
  struct engine_reading r;
  memset(&r, 0, sizeof r);
  char why[ENGINE_REASON_LEN] = "";
  int rc = engines_scrape_url(es->engines, t->endpoint, engine_signal_kind(t->esignal), &r, why,
                              sizeof why);
  if (rc == GS_EINVAL || rc == GS_ENOMEM) {
    snprintf(err, errlen, "invalid trigger metadata: %s=\"%.200s\": %s",
             t->endpoint_key ? t->endpoint_key : "endpoint", t->endpoint, why);
    return rc;
  }
  sel->matched = sel->selected = 1;
  double v = 0;
  if (rc != 0 || !r.fresh || engine_value(&r, t->esignal, t->max_num_seqs, &v) != 0) {
    scaler_selection_note(sel, "%s %.200s: no fresh %s reading: %s",
                          t->endpoint_key ? t->endpoint_key : "endpoint", t->endpoint,
                          engine_signal_name(t->esignal),
                          why[0]        ? why
                          : r.reason[0] ? r.reason
                                        : "the URL does not serve it (a Triton rate needs a "
                                          "second scrape)");
    return 0;
  }
  sel->fresh = 1;
  return scaler_selection_add(sel, v, 0);
}

static int engine_select(void *ud, const struct trigger *t, struct scaler_selection *sel, char *err,
                         size_t errlen) {
  struct engine_source *es = ud;
  if (!t->engine) { /* the dual source sends GPU triggers elsewhere; never reached */
    snprintf(err, errlen, "not an engine trigger");
    return GS_EINVAL;
  }
  if (!es->engines) {
    snprintf(err, errlen, "engine metrics are off on this agent: %s (docs/engines.md)",
             es->why[0] ? es->why : "not started");
    return GS_EUNAVAIL;
  }
  if (t->endpoint[0])
    return select_url(es, t, sel, err, errlen);
  int64_t iv = engines_interval_ms(es->engines);
  if (t->window_ms > 0 && iv > 0 && t->window_ms > LATWIN_ENTRIES * iv) {
    /* longer than each pod's kept scrapes: it would silently mean less than it says */
    snprintf(err, errlen,
             "invalid trigger metadata: window=\"%llds\": a latency window reads each engine "
             "pod's last %d scrapes, %llds at this agent's --engine-interval=%lldms; use a window "
             "of at most %llds, or a longer --engine-interval",
             (long long)(t->window_ms / 1000), LATWIN_ENTRIES,
             (long long)(LATWIN_ENTRIES * iv / 1000), (long long)iv,
             (long long)(LATWIN_ENTRIES * iv / 1000));
    return GS_EINVAL;
  }
  struct engine_reading *rs = NULL;
  size_t n = 0;
  bool on = false;
  char why[ENGINE_REASON_LEN] = "";
  int rc = engines_copy_window(es->engines, t->window_ms, &rs, &n, &on, why, sizeof why);
  if (rc) {
    snprintf(err, errlen, "cannot copy the engine readings");
    return rc;
  }
  if (!on) {
    free(rs);
    snprintf(err, errlen, "engine metrics are off on this agent: %s (docs/engines.md)",
             why[0] ? why : "the pod list cannot be had now");
    return GS_EUNAVAIL;
  }
  uint32_t next_group = 0;
  size_t stale = 0;
  rc = scaler_select_engines(t, rs, n, true, node_of(es), sel, &next_group, &stale);
  free(rs);
  return rc;
}

struct scaler_selector engine_source_selector(struct engine_source *es) {
  struct scaler_selector s = {SCALER_SCOPE_NODE, engine_select, NULL, es};
  return s;
}
