/* Plain-text report for terminals: summary, recommendations, nodes, workloads, notes. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "core/timeutil.h"
#include "rightsize/report.h"
#include "rightsize/sharepack.h"

static void fmt_time(int64_t ms, char *out, size_t len) {
  time_t s = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&s, &tm);
  strftime(out, len, "%Y-%m-%d %H:%M UTC", &tm);
}

/* "$1,234.56" or "-" when absent. */
static void money(bool have, double v, char *out, size_t len) {
  if (!have || !isfinite(v)) {
    snprintf(out, len, "-");
    return;
  }
  char raw[48];
  snprintf(raw, sizeof(raw), "%.2f", fabs(v));
  char *dot = strchr(raw, '.');
  size_t ilen = dot ? (size_t)(dot - raw) : strlen(raw);
  size_t o = 0;
  if (v < 0 && o + 1 < len)
    out[o++] = '-';
  if (o + 1 < len)
    out[o++] = '$';
  for (size_t i = 0; i < ilen && o + 1 < len; i++) {
    out[o++] = raw[i];
    if ((ilen - i - 1) % 3 == 0 && i + 1 < ilen && o + 1 < len)
      out[o++] = ',';
  }
  for (const char *p = dot; p && *p && o + 1 < len; p++)
    out[o++] = *p;
  out[o] = '\0';
}

static void pct(const struct rs_dist *d, unsigned bit, double v, char *out, size_t len) {
  if (d->valid & bit)
    snprintf(out, len, "%.1f", v);
  else
    snprintf(out, len, "-");
}

static int summary(const struct rs_report *r, struct buf *o) {
  const struct rs_summary *s = &r->summary;
  char a[32], b[32], d[32], st[40], en[40];
  fmt_time(r->start_ms, st, sizeof(st));
  fmt_time(r->end_ms, en, sizeof(en));
  duration_format(r->params.step_ms, d, sizeof(d));
  int rc = buf_printf(o, "gpuscale rightsize (%s)\n", RS_SCHEMA);
  rc = rc ? rc
          : buf_printf(o, "Prometheus  %s\nWindow      %s .. %s, step %s\n", r->source_url, st, en,
                       d);
  rc = rc ? rc : buf_printf(o, "Prices      %s (%s)\n\n", r->price_source, r->currency);
  rc = rc ? rc
          : buf_printf(o, "SUMMARY\n  nodes %zu, GPUs %zu, workloads %zu, recommendations %zu\n",
                       s->n_nodes, s->n_gpus, s->n_workloads, s->n_recs);
  rc = rc ? rc
          : buf_printf(o,
                       "  GPU-hours paid      %12.1f\n  GPU-hours observed  %12.1f\n  GPU-hours "
                       "used      %12.1f  (utilisation-weighted)\n  GPU-hours idle      %12.1f\n",
                       s->gpu_hours_paid, s->gpu_hours_observed, s->gpu_hours_used,
                       s->gpu_hours_idle);
  bool cost = (s->valid & RS_SUM_HAS_COST) != 0;
  money(cost, s->cost_window, a, sizeof(a));
  money(cost, s->idle_cost_window, b, sizeof(b));
  rc = rc ? rc : buf_printf(o, "  cost in window      %12s   idle cost in window %12s\n", a, b);
  money(cost, s->cost_month, a, sizeof(a));
  money(cost, s->idle_cost_month, b, sizeof(b));
  rc = rc ? rc : buf_printf(o, "  cost per month      %12s   idle cost per month %12s\n", a, b);
  if (s->n_gpus_unpriced)
    rc = rc ? rc
            : buf_printf(o, "  %zu GPU(s) have no price and are left out of every $ figure\n",
                         s->n_gpus_unpriced);
  bool sav = (s->valid & RS_SUM_HAS_SAVINGS) != 0;
  money(sav, s->savings_month, a, sizeof(a));
  rc = rc ? rc : buf_printf(o, "  projected savings   %12s / month\n", a);
  for (int k = 0; !rc && k < RS_REC_KIND_COUNT; k++) {
    money(sav, s->savings_month_by_kind[k], a, sizeof(a));
    rc = buf_printf(o, "    %-12s %3zu  %12s\n", rs_rec_kind_name((enum rs_rec_kind)k),
                    s->recs_by_kind[k], a);
  }
  return rc ? rc : buf_puts(o, "\n");
}

static void subject(const struct rs_report *r, const struct rs_rec *c, char *out, size_t len) {
  if (c->kind == RS_REC_IDLE_NODE || c->kind == RS_REC_WATCH_NODE)
    snprintf(out, len, "node %s", r->nodes[c->node_idx].name);
  else if (c->kind == RS_REC_CONSOLIDATE)
    snprintf(out, len, "%zu node(s) freed", c->n_nodes);
  else if (c->workload_idx < r->n_workloads)
    snprintf(out, len, "%.60s/%.120s", r->workloads[c->workload_idx].namespace_,
             r->workloads[c->workload_idx].pod);
  else
    snprintf(out, len, "-");
}

static void action(const struct rs_rec *c, char *out, size_t len) {
  switch (c->kind) {
  case RS_REC_IDLE_NODE: snprintf(out, len, "drain"); break;
  case RS_REC_CONSOLIDATE:
    snprintf(out, len, "pack %zu->%zu GPUs", c->gpus_before, c->gpus_after);
    break;
  case RS_REC_MIG: snprintf(out, len, "MIG %s", c->mig_profile); break;
  case RS_REC_TIMESLICE: snprintf(out, len, "time-slice x%u", c->share_ways); break;
  case RS_REC_CHEAPER_GPU: snprintf(out, len, "move to %s", c->target_model); break;
  case RS_REC_WATCH_NODE: snprintf(out, len, "watch (no drain)"); break;
  default: snprintf(out, len, "-"); break;
  }
}

static int recs(const struct rs_report *r, struct buf *o) {
  int rc = buf_puts(o, "RECOMMENDATIONS\n");
  if (!r->n_recs)
    return rc ? rc : buf_puts(o, "  none\n\n");
  rc = rc ? rc
          : buf_printf(o, "  %-3s %-12s %-40s %-20s %14s  %s\n", "#", "KIND", "SUBJECT", "ACTION",
                       "SAVINGS/MONTH", "CONFIDENCE");
  for (size_t i = 0; !rc && i < r->n_recs; i++) {
    const struct rs_rec *c = &r->recs[i];
    char subj[300], act[96], sav[32];
    subject(r, c, subj, sizeof(subj));
    action(c, act, sizeof(act));
    money((c->valid & RS_REC_HAS_SAVINGS) != 0, c->savings_month, sav, sizeof(sav));
    rc = buf_printf(o, "  %-3zu %-12s %-40s %-20s %14s  %s (%.2f)\n", i + 1,
                    rs_rec_kind_name(c->kind), subj, act, sav,
                    rs_confidence_name(c->confidence_level), c->confidence);
    rc =
        rc ? rc
           : buf_printf(o, "      why:      %s\n      evidence: %s\n", c->reason, c->evidence_text);
    if (!rc && (c->evidence.valid & RS_EV_BURST))
      rc = buf_printf(o,
                      "      bursts:   utilisation above %.1f %% in %.2f %% of steps (tolerance "
                      "%g %%)\n",
                      c->evidence.burst_limit_pct, 100 * c->evidence.burst_share,
                      100 * r->params.burst_tolerance);
    char pk[RS_TEXT_MAX];
    rs_pack_describe(r, c, pk, sizeof(pk));
    if (!rc && pk[0])
      rc = buf_printf(o, "      packing:  %s\n", pk);
  }
  return rc ? rc : buf_puts(o, "\n");
}

static int nodes(const struct rs_report *r, struct buf *o) {
  double window_h = (double)(r->end_ms - r->start_ms) / 3600000.0;
  int rc =
      buf_puts(o, "NODES ($/MONTH: the cost in the window at a month's rate, as in SUMMARY)\n");
  rc = rc ? rc
          : buf_printf(o, "  %-32s %-22s %4s %8s %8s %8s %10s %7s %9s %5s %12s\n", "NODE", "MODEL",
                       "GPUS", "UTIL50", "UTIL95", "UTILMAX", "MEM95MiB", "IDLE%", "OBSERVEDh",
                       "GAPS", "$/MONTH");
  for (size_t i = 0; !rc && i < r->n_nodes; i++) {
    const struct rs_node *n = &r->nodes[i];
    char u50[16], u95[16], umx[16], m95[16], idle[16], mon[32];
    pct(&n->util, RS_HAS_P50, n->util.p50, u50, sizeof(u50));
    pct(&n->util, RS_HAS_P95, n->util.p95, u95, sizeof(u95));
    pct(&n->util, RS_HAS_MAX, n->util.max, umx, sizeof(umx));
    if (n->mem_mib.valid & RS_HAS_P95)
      snprintf(m95, sizeof(m95), "%.0f", n->mem_mib.p95);
    else
      snprintf(m95, sizeof(m95), "-");
    if (n->valid & RS_HAS_IDLE)
      snprintf(idle, sizeof(idle), "%.1f", n->idle_fraction * 100.0);
    else
      snprintf(idle, sizeof(idle), "-");
    /* What the node cost over the window, at a month's rate: the summary's cost per month is the
     * sum of these. Its list price (x its GPUs x 730) counted MIG instances and hours before it
     * existed, and disagreed with the summary. */
    money((n->valid & RS_HAS_COST) != 0 && window_h > 0,
          n->cost_window / window_h * RS_HOURS_PER_MONTH, mon, sizeof(mon));
    rc = buf_printf(o, "  %-32.32s %-22.22s %4zu %8s %8s %8s %10s %7s %9.1f %5zu %12s\n", n->name,
                    n->model[0] ? n->model : "-", n->n_gpus, u50, u95, umx, m95, idle,
                    n->hours_observed, n->n_gaps, mon);
  }
  return rc ? rc : buf_puts(o, "\n");
}

static int workloads(const struct rs_report *r, struct buf *o) {
  int rc = buf_puts(o, "WORKLOADS\n");
  rc = rc ? rc
          : buf_printf(o, "  %-20s %-36s %-28s %4s %8s %8s %10s %7s %9s\n", "NAMESPACE", "POD",
                       "OWNER", "GPUS", "UTIL50", "UTIL95", "MEM95MiB", "IDLE%", "OBSERVEDh");
  bool guessed = false;
  for (size_t i = 0; !rc && i < r->n_workloads; i++) {
    const struct rs_workload *w = &r->workloads[i];
    char u50[16], u95[16], m95[16], idle[16], own[RS_NAME_MAX + 2];
    guessed |= w->owner_source == RS_OWNER_HEURISTIC;
    pct(&w->util, RS_HAS_P50, w->util.p50, u50, sizeof(u50));
    pct(&w->util, RS_HAS_P95, w->util.p95, u95, sizeof(u95));
    if (w->mem_mib.valid & RS_HAS_P95)
      snprintf(m95, sizeof(m95), "%.0f", w->mem_mib.p95);
    else
      snprintf(m95, sizeof(m95), "-");
    if (w->valid & RS_HAS_IDLE)
      snprintf(idle, sizeof(idle), "%.1f", w->idle_fraction * 100.0);
    else
      snprintf(idle, sizeof(idle), "-");
    snprintf(own, sizeof(own), "%s%s", w->owner, w->owner_source == RS_OWNER_HEURISTIC ? "*" : "");
    rc = buf_printf(o, "  %-20.20s %-36.36s %-28.28s %4zu %8s %8s %10s %7s %9.1f\n", w->namespace_,
                    w->pod, own, w->n_gpus, u50, u95, m95, idle, w->hours_observed);
  }
  if (rc)
    return rc;
  return buf_puts(o, guessed ? "  (* owner guessed from the pod name)\n\n" : "\n");
}

int report_text(const struct rs_report *r, struct buf *out) {
  int rc = summary(r, out);
  rc = rc ? rc : recs(r, out);
  rc = rc ? rc : nodes(r, out);
  rc = rc ? rc : workloads(r, out);
  if (!rc && r->n_notes) {
    rc = buf_puts(out, "NOTES\n");
    for (size_t i = 0; !rc && i < r->n_notes; i++)
      rc = buf_printf(out, "  - %s\n", r->notes[i].text);
  }
  return rc;
}
