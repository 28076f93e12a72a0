/* The rightsize HTML report: one self-contained page (inline CSS and SVG, no scripts, no external
 * resources) with the summary, savings chart, recommendations, utilisation heatmap and node
 * timelines. The page is also well-formed XML, so tests can parse it whole. */
#include "rightsize/report.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "rightsize/sharepack.h"
#include "rightsize/svg.h"

/* Size limits keep a 1000-GPU report in the low megabytes and quick to render. */
#define HEAT_MAX_ROWS RS_TIMELINE_GPUS /* GPUs drawn (those with a timeline); a note says so */
#define HEAT_MAX_CELLS 120000 /* rows x columns; columns are merged in time to stay under it */
#define TIMELINE_MAX_NODES 200
#define BARS_MAX 40

static void wrc(struct svg_out *o, int rc) {
  if (!o->rc)
    o->rc = rc;
}

/* ---- formatting ---------------------------------------------------------------------------- */

/* "$12,345.67" for USD, "12,345.67 EUR" otherwise; escaped (the currency comes from a file). */
static void wmoney(struct svg_out *o, const struct rs_report *r, double v) {
  char digits[64], grouped[96];
  int usd = !strcmp(r->currency, "USD") || !r->currency[0];
  if (!isfinite(v)) {
    svg_outs(o, "?");
    return;
  }
  snprintf(digits, sizeof digits, "%.2f", fabs(v));
  size_t n = strlen(digits), intlen = strcspn(digits, "."), g = 0;
  for (size_t i = 0; i < n && g + 2 < sizeof grouped; i++) {
    if (i > 0 && i < intlen && (intlen - i) % 3 == 0)
      grouped[g++] = ',';
    grouped[g++] = digits[i];
  }
  grouped[g] = '\0';
  svg_outf(o, "%s%s%s", v < 0 ? "-" : "", usd ? "$" : "", grouped);
  if (!usd) {
    svg_outs(o, " ");
    svg_outesc(o, r->currency);
  }
}

static void wtime(struct svg_out *o, int64_t ms) {
  char t[32];
  svg_format_time(ms / 1000, t, sizeof t);
  svg_outf(o, "%s UTC", t);
}

static void wduration(struct svg_out *o, int64_t ms) {
  double h = (double)ms / 3600000.0;
  if (h >= 48)
    svg_outf(o, "%.1f d", h / 24);
  else if (h >= 1)
    svg_outf(o, "%.1f h", h);
  else if (ms >= 60000 && ms % 60000 == 0)
    svg_outf(o, "%lld min", (long long)(ms / 60000));
  else if (ms >= 60000) /* in its own units: 90 s is "1 min 30 s", never "2 min" */
    svg_outf(o, "%lld min %lld s", (long long)(ms / 60000), (long long)(ms % 60000 / 1000));
  else if (ms >= 1000)
    svg_outf(o, "%lld s", (long long)(ms / 1000)); /* a 30 s step was "0 min" */
  else
    svg_outf(o, "%lld ms", (long long)ms);
}

static const char *kind_label(enum rs_rec_kind k) {
  switch (k) {
  case RS_REC_IDLE_NODE: return "Drain idle node";
  case RS_REC_CONSOLIDATE: return "Consolidate";
  case RS_REC_MIG: return "MIG slice";
  case RS_REC_TIMESLICE: return "Time-slicing";
  case RS_REC_CHEAPER_GPU: return "Cheaper GPU";
  case RS_REC_WATCH_NODE: return "Watch node (no drain)";
  case RS_REC_KIND_COUNT: break;
  }
  return "Other";
}

static const char *kind_color(enum rs_rec_kind k) {
  static const char *const c[RS_REC_KIND_COUNT] = {"#d62728", "#ff7f0e", "#2ca02c",
                                                   "#17becf", "#9467bd", "#7f7f7f"};
  return (unsigned)k < RS_REC_KIND_COUNT ? c[k] : "#7f7f7f";
}

/* The subject of a recommendation in a few words, written escaped: a node, a pod or a group. */
static void wsubject(struct svg_out *o, const struct rs_report *r, const struct rs_rec *rec) {
  if (rec->kind == RS_REC_IDLE_NODE || rec->kind == RS_REC_WATCH_NODE) {
    svg_outesc(o, rec->node_idx < r->n_nodes ? r->nodes[rec->node_idx].name : "?");
  } else if (rec->kind == RS_REC_CONSOLIDATE) {
    svg_outf(o, "%zu workload%s; frees ", rec->n_workloads, rec->n_workloads == 1 ? "" : "s");
    if (!rec->n_nodes)
      svg_outf(o, "%zu GPU%s", rec->n_gpus, rec->n_gpus == 1 ? "" : "s");
    for (size_t i = 0; i < rec->n_nodes && i < 8; i++) {
      svg_outs(o, i ? ", " : "");
      svg_outesc(o, rec->nodes[i] < r->n_nodes ? r->nodes[rec->nodes[i]].name : "?");
    }
    if (rec->n_nodes > 8)
      svg_outf(o, " and %zu more", rec->n_nodes - 8);
  } else if (rec->workload_idx < r->n_workloads) {
    const struct rs_workload *wl = &r->workloads[rec->workload_idx];
    svg_outesc(o, wl->namespace_);
    svg_outs(o, "/");
    svg_outesc(o, wl->pod);
  } else {
    svg_outs(o, "?");
  }
}

/* The proposed change, e.g. "MIG 1g.10gb (3 per GPU)" or "8 → 5 GPUs". */
static void wtarget(struct svg_out *o, const struct rs_rec *rec) {
  switch (rec->kind) {
  case RS_REC_IDLE_NODE: svg_outs(o, "cordon and drain; the autoscaler removes the node"); break;
  case RS_REC_CONSOLIDATE:
    svg_outf(o, "%zu \xE2\x86\x92 %zu GPUs", rec->gpus_before, rec->gpus_after);
    break;
  case RS_REC_MIG:
    svg_outs(o, "MIG ");
    svg_outesc(o, rec->mig_profile);
    if (rec->share_ways)
      svg_outf(o, " (%u per GPU)", rec->share_ways);
    break;
  case RS_REC_TIMESLICE: svg_outf(o, "time-slicing, %u per GPU", rec->share_ways); break;
  case RS_REC_CHEAPER_GPU:
    svg_outs(o, "move to ");
    svg_outesc(o, rec->target_model);
    break;
  case RS_REC_WATCH_NODE:
    svg_outs(o, "watch: not drained (below the drain floors); --apply leaves it alone");
    break;
  case RS_REC_KIND_COUNT: break;
  }
}

/* Where a MIG or time-slicing packing puts the workload: which card, beside whom, what it frees. */
static void wpacking(struct svg_out *o, const struct rs_report *r, const struct rs_rec *rec) {
  char d[RS_TEXT_MAX];
  rs_pack_describe(r, rec, d, sizeof(d));
  if (!d[0])
    return;
  svg_outs(o, "<br/><span class=\"packing\">packing: ");
  svg_outesc(o, d);
  svg_outs(o, "</span>");
}

/* ---- page pieces --------------------------------------------------------------------------- */

static const char css[] =
    "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;"
    "background:#f6f7f9;color:#222;font-size:14px}"
    "main{max-width:1200px;margin:0 auto;padding:16px 24px 48px}"
    "h1{font-size:22px;margin:8px 0 4px}h2{font-size:17px;margin:28px 0 8px;"
    "border-bottom:1px solid #ddd;padding-bottom:4px}"
    ".meta{color:#555;font-size:13px;margin:0 0 12px}"
    ".cards{display:flex;flex-wrap:wrap;gap:12px}"
    ".card{background:#fff;border:1px solid #ddd;border-radius:6px;padding:10px 14px;"
    "min-width:200px;flex:1}"
    ".card .v{font-size:22px;font-weight:600}.card .k{color:#555;font-size:12px}"
    ".card.save .v{color:#1a7f37}.card.idle .v{color:#b42318}"
    "table{border-collapse:collapse;background:#fff;width:100%;font-size:13px}"
    "th,td{border:1px solid #ddd;padding:4px 6px;text-align:left;vertical-align:top}"
    "th{background:#eef0f3}td.n{text-align:right;white-space:nowrap}"
    ".chart{background:#fff;border:1px solid #ddd;border-radius:6px;padding:8px;margin:8px 0}"
    ".kind{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px}"
    ".conf-high{color:#1a7f37}.conf-medium{color:#9a6700}.conf-low{color:#b42318}"
    ".muted{color:#666}ul.notes{background:#fff;border:1px solid #ddd;padding:8px 28px}"
    "@media print{body{background:#fff}.chart,.card{break-inside:avoid}}";

static void head(struct svg_out *o, const struct rs_report *r) {
  svg_outs(
      o,
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
      /* Nothing may load or run: the file must read the same offline, and a label that
       * escaped escaping still could not execute. */
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "style-src 'unsafe-inline'; img-src data:\"/>\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n"
      "<meta name=\"generator\" content=\"gpuscale rightsize\"/>\n<title>GPU rightsizing report, ");
  wtime(o, r->end_ms);
  svg_outs(o, "</title>\n<style>");
  svg_outs(o, css);
  svg_outs(
      o, "</style>\n</head>\n<body>\n<main>\n<h1>GPU rightsizing report</h1>\n<p class=\"meta\">");
  svg_outs(o, "Window ");
  wtime(o, r->start_ms);
  svg_outs(o, " \xE2\x80\x93 ");
  wtime(o, r->end_ms);
  svg_outs(o, " (");
  wduration(o, r->end_ms - r->start_ms);
  svg_outs(o, ", step ");
  wduration(o, r->params.step_ms);
  svg_outs(o, ") from <code>");
  svg_outesc(o, r->source_url);
  svg_outs(o, "</code>. Prices: ");
  svg_outesc(o, r->price_source[0] ? r->price_source : "none");
  svg_outs(o, ". Generated ");
  wtime(o, r->generated_ms);
  svg_outs(o, " by gpuscale " GPUSCALE_VERSION ", schema ");
  svg_outesc(o, r->schema);
  svg_outs(o, ".</p>\n");
}

/* The page's output: o, and where report_html_stream hands it on (flush NULL: it holds all). The
 * parts below take &hout.o; spill finds the rest from it. */
struct hout {
  struct svg_out o; /* first */
  int (*flush)(void *ud, struct buf *b);
  void *ud;
};

/* What is made so far goes on to the stream, if any, once it passes 256 KiB (or, with last, at
 * all): between two parts of the page, never inside one. o is the page's (a struct hout's). */
static void spill(struct svg_out *o, bool last) {
  struct hout *h = (struct hout *)o;
  if (h->flush && !o->rc && (o->b->len >= ((size_t)256 << 10) || (last && o->b->len))) {
    o->rc = h->flush(h->ud, o->b);
    buf_reset(o->b);
  }
}

static void card(struct svg_out *o, const char *cls, const char *key) {
  svg_outf(o, "<div class=\"card%s%s\"><div class=\"k\">%s</div><div class=\"v\">", cls ? " " : "",
           cls ? cls : "", key);
}

static void summary(struct svg_out *o, const struct rs_report *r) {
  const struct rs_summary *s = &r->summary;
  int cost = (s->valid & RS_SUM_HAS_COST) != 0, sav = (s->valid & RS_SUM_HAS_SAVINGS) != 0;
  svg_outs(o, "<h2 id=\"summary\">Summary</h2>\n<div class=\"cards\">\n");
  card(o, NULL, "GPU-hours paid");
  svg_outf(o, "%.1f</div><div class=\"k\">%zu GPUs on %zu nodes, %zu workloads</div></div>\n",
           s->gpu_hours_paid, s->n_gpus, s->n_nodes, s->n_workloads);
  card(o, NULL, "GPU-hours used (utilisation-weighted)");
  svg_outf(
      o, "%.1f</div><div class=\"k\">%.1f %% of paid; %.1f h observed, %.1f h idle</div></div>\n",
      s->gpu_hours_used, s->gpu_hours_paid > 0 ? 100 * s->gpu_hours_used / s->gpu_hours_paid : 0,
      s->gpu_hours_observed, s->gpu_hours_idle);
  card(o, "idle", "Idle cost over the window");
  if (cost) {
    wmoney(o, r, s->idle_cost_window);
    svg_outs(o, "</div><div class=\"k\">");
    wmoney(o, r, s->idle_cost_month);
    svg_outs(o, " a month, of ");
    wmoney(o, r, s->cost_month);
    svg_outs(o, " paid a month</div></div>\n");
  } else {
    svg_outs(o, "\xE2\x80\x94</div><div class=\"k\">no prices known</div></div>\n");
  }
  card(o, "save", "Projected savings a month");
  if (sav)
    wmoney(o, r, s->savings_month);
  else
    svg_outs(o, "\xE2\x80\x94");
  svg_outf(o, "</div><div class=\"k\">%zu recommendation%s</div></div>\n</div>\n", s->n_recs,
           s->n_recs == 1 ? "" : "s");
  if (s->n_gpus_unpriced)
    svg_outf(o,
             "<p class=\"muted\">%zu GPU%s had no price and are left out of every $ figure.</p>\n",
             s->n_gpus_unpriced, s->n_gpus_unpriced == 1 ? "" : "s");

  svg_outs(
      o,
      "<h2 id=\"by-kind\">Savings by kind</h2>\n<table>\n<tr><th>kind</th><th>recommendations</th>"
      "<th>savings a month</th></tr>\n");
  for (int k = 0; k < RS_REC_KIND_COUNT; k++) {
    svg_outf(o,
             "<tr><td><span class=\"kind\" style=\"background:%s\"></span>%s</td><td class=\"n\">"
             "%zu</td><td class=\"n\">",
             kind_color((enum rs_rec_kind)k), kind_label((enum rs_rec_kind)k), s->recs_by_kind[k]);
    if (sav)
      wmoney(o, r, s->savings_month_by_kind[k]);
    else
      svg_outs(o, "\xE2\x80\x94");
    svg_outs(o, "</td></tr>\n");
  }
  svg_outs(o, "</table>\n");
}

static int cmp_savings_desc(const void *a, const void *b) {
  const struct rs_rec *x = *(const struct rs_rec *const *)a, *y = *(const struct rs_rec *const *)b;
  double sx = (x->valid & RS_REC_HAS_SAVINGS) ? x->savings_month : -1;
  double sy = (y->valid & RS_REC_HAS_SAVINGS) ? y->savings_month : -1;
  return (sx < sy) - (sx > sy);
}

/* One bar per recommendation (the largest BARS_MAX), coloured by kind. Labels and texts are
 * built into one buffer and referenced by offset, then pointed at once it stops moving. */
static void savings_chart(struct svg_out *o, const struct rs_report *r) {
  size_t n = r->n_recs < BARS_MAX ? r->n_recs : BARS_MAX;
  const struct rs_rec **order = r->n_recs ? calloc(r->n_recs, sizeof *order) : NULL;
  struct svg_bar *bars = n ? calloc(n, sizeof *bars) : NULL;
  size_t *off = n ? calloc(2 * n, sizeof *off) : NULL;
  struct buf text;
  buf_init(&text, 1u << 20);
  if (r->n_recs && (!order || !bars || !off)) {
    wrc(o, GS_ENOMEM);
    goto out;
  }
  size_t n_acts = 0; /* a watched node is not advice to act: no bar */
  for (size_t i = 0; i < r->n_recs; i++)
    if (r->recs[i].kind != RS_REC_WATCH_NODE)
      order[n_acts++] = &r->recs[i];
  if (n > n_acts)
    n = n_acts;
  if (n_acts)
    qsort(order, n_acts, sizeof *order, cmp_savings_desc);
  struct svg_out t = {&text, 0};
  for (size_t i = 0; i < n; i++) {
    /* Labels are raw text here: svg_barchart escapes them. */
    off[2 * i] = text.len;
    svg_outf(&t, "%s: ", kind_label(order[i]->kind));
    const struct rs_rec *rec = order[i];
    if (rec->kind == RS_REC_IDLE_NODE)
      svg_outs(&t, rec->node_idx < r->n_nodes ? r->nodes[rec->node_idx].name : "?");
    else if (rec->kind == RS_REC_CONSOLIDATE)
      svg_outf(&t, "%zu workloads, %zu \xE2\x86\x92 %zu GPUs", rec->n_workloads, rec->gpus_before,
               rec->gpus_after);
    else if (rec->workload_idx < r->n_workloads)
      svg_outf(&t, "%s/%s", r->workloads[rec->workload_idx].namespace_,
               r->workloads[rec->workload_idx].pod);
    wrc(&t, buf_append(&text, "", 1));
    off[2 * i + 1] = text.len;
    if (rec->valid & RS_REC_HAS_SAVINGS) {
      wmoney(&t, r, rec->savings_month);
      svg_outs(&t, "/mo");
    } else {
      svg_outs(&t, "no price");
    }
    wrc(&t, buf_append(&text, "", 1));
    bars[i].value = (rec->valid & RS_REC_HAS_SAVINGS) ? rec->savings_month : 0;
    bars[i].color = kind_color(rec->kind);
  }
  wrc(o, t.rc);
  for (size_t i = 0; i < n && !o->rc; i++) {
    bars[i].label = text.data + off[2 * i];
    bars[i].text = text.data + off[2 * i + 1];
  }
  svg_outs(o, "<h2 id=\"savings\">Savings by recommendation</h2>\n<div class=\"chart\">\n");
  struct svg_barchart c = {"Projected savings a month, largest first", bars, n};
  if (!o->rc)
    wrc(o, svg_barchart(o->b, &c));
  svg_outs(o, "</div>\n");
  if (n_acts > n)
    svg_outf(o, "<p class=\"muted\">The %zu smaller recommendations are in the table below.</p>\n",
             n_acts - n);
out:
  buf_free(&text);
  free(off);
  free(bars);
  free(order);
}

static void evidence_cell(struct svg_out *o, const struct rs_report *r, const struct rs_rec *rec) {
  const struct rs_evidence *e = &rec->evidence;
  svg_outesc(o, rec->evidence_text);
  if (e->valid & RS_EV_BURST)
    svg_outf(o,
             "<br/><span class=\"burst\">bursts: utilisation above %.1f %% (the slice's share) "
             "in %.2f %% of steps; tolerance %g %%</span>",
             e->burst_limit_pct, 100 * e->burst_share, 100 * r->params.burst_tolerance);
  if (e->valid & RS_EV_COVERAGE) {
    svg_outf(o, "<br/><span class=\"muted\">coverage %.0f %%", 100 * e->coverage);
    if (e->valid & RS_EV_HOURS)
      svg_outf(o, ", %.1f h observed", e->hours_observed);
    svg_outf(o, ", %zu gap%s</span>", e->n_gaps, e->n_gaps == 1 ? "" : "s");
  }
}

static void recs_table(struct svg_out *o, const struct rs_report *r) {
  svg_outs(o, "<h2 id=\"recommendations\">Recommendations</h2>\n");
  if (!r->n_recs) {
    svg_outs(o,
             "<p>No recommendations: every GPU with enough data is in use, or too little data was "
             "found to decide.</p>\n");
    return;
  }
  svg_outs(o, "<table>\n<tr><th>#</th><th>kind</th><th>subject</th><th>change</th><th>reason</th>"
              "<th>evidence</th><th>savings a month</th><th>confidence</th></tr>\n");
  for (size_t i = 0; i < r->n_recs && !o->rc; i++) {
    spill(o, false);
    const struct rs_rec *rec = &r->recs[i];
    const char *lvl = rs_confidence_name(rec->confidence_level);
    svg_outf(
        o,
        "<tr><td class=\"n\">%zu</td><td><span class=\"kind\" style=\"background:%s\"></span>%s"
        "</td><td>",
        i + 1, kind_color(rec->kind), kind_label(rec->kind));
    wsubject(o, r, rec);
    svg_outs(o, "</td><td>");
    wtarget(o, rec);
    wpacking(o, r, rec);
    svg_outs(o, "</td><td>");
    svg_outesc(o, rec->reason);
    svg_outs(o, "</td><td>");
    evidence_cell(o, r, rec);
    svg_outs(o, "</td><td class=\"n\">");
    if (rec->valid & RS_REC_HAS_SAVINGS)
      wmoney(o, r, rec->savings_month);
    else
      svg_outs(o, rec->kind == RS_REC_WATCH_NODE ? "none (watch)" : "no price");
    svg_outf(o, "</td><td class=\"conf-%s\">%s (%.2f)</td></tr>\n", lvl, lvl, rec->confidence);
  }
  svg_outs(o, "</table>\n");
}

/* ---- heatmap ------------------------------------------------------------------------------- */

/* Mean utilisation over buckets [b0, b1), weighted by samples; NaN when none has data. */
static double bucket_util(const struct rs_bucket *tl, size_t b0, size_t b1) {
  double sum = 0, n = 0;
  for (size_t i = b0; i < b1; i++) {
    if (!tl[i].n || !(tl[i].valid & RS_BKT_UTIL))
      continue;
    sum += (double)tl[i].util_mean * tl[i].n;
    n += tl[i].n;
  }
  return n > 0 ? sum / n : NAN;
}

static void heatmap(struct svg_out *o, const struct rs_report *r) {
  svg_outs(o, "<h2 id=\"heatmap\">Utilisation heatmap, GPU \xC3\x97 time</h2>\n");
  if (!r->n_gpus || !r->n_buckets || r->bucket_ms <= 0) {
    svg_outs(o, "<p>No GPU time series to draw.</p>\n");
    return;
  }
  size_t rows = r->n_gpus < HEAT_MAX_ROWS ? r->n_gpus : HEAT_MAX_ROWS;
  size_t merge = (rows * r->n_buckets + HEAT_MAX_CELLS - 1) / HEAT_MAX_CELLS;
  if (merge < 1)
    merge = 1;
  size_t cols = (r->n_buckets + merge - 1) / merge;
  double *v = calloc(rows * cols, sizeof *v);
  char *labels = calloc(rows, RS_NAME_MAX + RS_SHORT_MAX + 8);
  const char **lp = calloc(rows, sizeof *lp);
  if (!v || !labels || !lp) {
    wrc(o, GS_ENOMEM);
    goto out;
  }
  for (size_t g = 0; g < rows; g++) {
    const struct rs_gpu *gpu = &r->gpus[g];
    char *l = labels + g * (RS_NAME_MAX + RS_SHORT_MAX + 8);
    if (gpu->gpu_i_id[0]) { /* a MIG instance: its own row (a long name is cut) */
      if (snprintf(l, RS_NAME_MAX + RS_SHORT_MAX + 8, "%s gpu%s/mig%.8s", gpu->node, gpu->gpu,
                   gpu->gpu_i_id) < 0)
        l[0] = '\0';
    } else
      snprintf(l, RS_NAME_MAX + RS_SHORT_MAX + 8, "%s gpu%s", gpu->node, gpu->gpu);
    lp[g] = l;
    for (size_t c = 0; c < cols; c++) {
      size_t b0 = c * merge, b1 = b0 + merge < r->n_buckets ? b0 + merge : r->n_buckets;
      v[g * cols + c] = gpu->timeline ? bucket_util(gpu->timeline, b0, b1) : NAN;
    }
  }
  int64_t step_s = r->bucket_ms * (int64_t)merge / 1000;
  struct svg_heatmap h = {
      .title = "Mean GPU utilisation per time bucket",
      .rows = rows,
      .cols = cols,
      .row_labels = lp,
      .values = v,
      .vmin = 0,
      .vmax = 100,
      .unit = "%",
      .t0 = r->start_ms / 1000,
      .step = step_s > 0 ? step_s : 1,
  };
  svg_outs(o, "<div class=\"chart\">\n");
  if (!o->rc)
    wrc(o, svg_heatmap(o->b, &h));
  svg_outs(o, "</div>\n<p class=\"muted\">One row per GPU (node, then GPU index), one column per ");
  wduration(o, r->bucket_ms * (int64_t)merge);
  svg_outs(o, ". Grey is a gap in the data: unknown, never counted as idle.");
  if (r->n_gpus > rows)
    svg_outf(o, " The first %zu of %zu GPUs are drawn.", rows, r->n_gpus);
  svg_outs(o, "</p>\n");
out:
  free(lp);
  free(labels);
  free(v);
}

/* ---- node timelines ------------------------------------------------------------------------ */

static int node_has_rec(const struct rs_report *r, size_t node) {
  for (size_t i = 0; i < r->n_recs; i++) {
    const struct rs_rec *rec = &r->recs[i];
    if (rec->kind == RS_REC_IDLE_NODE && rec->node_idx == node)
      return 1;
    for (size_t k = 0; k < rec->n_nodes; k++)
      if (rec->nodes[k] == node)
        return 1;
  }
  return 0;
}

static void node_chart(struct svg_out *o, const struct rs_report *r, const struct rs_node *nd,
                       double *y) {
  size_t nb = r->n_buckets;
  double *util = y, *mem = y + nb;
  int have_pct = 0, have_mib = 0;
  double mib_max = 0;
  for (size_t i = 0; i < nb; i++) {
    const struct rs_bucket *bk = &nd->timeline[i];
    util[i] = bk->n && (bk->valid & RS_BKT_UTIL) ? bk->util_mean : NAN;
    have_pct |= (bk->valid & RS_BKT_MEM_PCT) != 0;
    have_mib |= (bk->valid & RS_BKT_MEM) != 0;
    if ((bk->valid & RS_BKT_MEM) && bk->mem_mean_mib > mib_max)
      mib_max = bk->mem_mean_mib;
  }
  /* Memory as % of the framebuffer when the total is known (one axis for both lines); else a
   * second chart in MiB. */
  for (size_t i = 0; i < nb; i++) {
    const struct rs_bucket *bk = &nd->timeline[i];
    mem[i] = have_pct ? ((bk->valid & RS_BKT_MEM_PCT) ? bk->mem_mean_pct : NAN)
                      : ((bk->valid & RS_BKT_MEM) ? bk->mem_mean_mib : NAN);
  }
  char title[RS_NAME_MAX + RS_SHORT_MAX + 32];
  snprintf(title, sizeof title, "%s (%zu \xC3\x97 %s)", nd->name, nd->n_gpus,
           nd->model[0] ? nd->model : "GPU");
  struct svg_series s[2] = {{"utilisation (mean)", util, nb, "#1f77b4"},
                            {"memory used (% of FB)", mem, nb, "#ff7f0e"}};
  struct svg_linechart c = {title,
                            "%",
                            0,
                            100,
                            r->start_ms / 1000,
                            r->bucket_ms >= 1000 ? r->bucket_ms / 1000 : 1,
                            s,
                            have_pct ? 2 : 1};
  svg_outs(o, "<div class=\"chart\">\n");
  if (!o->rc)
    wrc(o, svg_linechart(o->b, &c));
  if (!have_pct && have_mib) {
    s[1].name = "memory used (MiB per GPU)";
    struct svg_linechart m = {NULL, " MiB", 0,     mib_max > 0 ? ceil(mib_max / 1024) * 1024 : 1,
                              c.t0, c.step, &s[1], 1};
    if (!o->rc)
      wrc(o, svg_linechart(o->b, &m));
  }
  svg_outs(o, "</div>\n");
}

static void timelines(struct svg_out *o, const struct rs_report *r) {
  svg_outs(o, "<h2 id=\"timelines\">Node timelines: utilisation and memory</h2>\n");
  if (!r->n_nodes || !r->n_buckets || r->bucket_ms <= 0) {
    svg_outs(o, "<p>No node time series to draw.</p>\n");
    return;
  }
  double *y = calloc(2 * r->n_buckets, sizeof *y);
  if (!y) {
    wrc(o, GS_ENOMEM);
    return;
  }
  svg_outs(
      o,
      "<p class=\"muted\">Mean over each node's GPUs per time bucket; a break in a line is a gap "
      "in the data. Nodes named by a recommendation come first.</p>\n");
  size_t drawn = 0;
  /* Two passes: nodes with a recommendation, then the rest, up to TIMELINE_MAX_NODES. */
  for (int pass = 0; pass < 2; pass++) {
    for (size_t i = 0; i < r->n_nodes && drawn < TIMELINE_MAX_NODES && !o->rc; i++) {
      spill(o, false);
      if (!r->nodes[i].timeline || node_has_rec(r, i) != (pass == 0))
        continue;
      node_chart(o, r, &r->nodes[i], y);
      drawn++;
    }
  }
  if (drawn < r->n_nodes)
    svg_outf(o, "<p class=\"muted\">%zu of %zu nodes drawn.</p>\n", drawn, r->n_nodes);
  free(y);
}

/* ---- node table, notes, parameters --------------------------------------------------------- */

static void wdist(struct svg_out *o, const struct rs_dist *d, unsigned bit, double v, int decimals,
                  const char *unit) {
  svg_outs(o, "<td class=\"n\">");
  if (d->valid & bit)
    svg_outf(o, "%.*f %s", decimals, v, unit);
  else
    svg_outs(o, "\xE2\x80\x94");
  svg_outs(o, "</td>");
}

static void nodes_table(struct svg_out *o, const struct rs_report *r) {
  svg_outs(o, "<h2 id=\"nodes\">Nodes</h2>\n<table>\n<tr><th>node</th><th>GPUs</th><th>model</th>"
              "<th>util p50</th><th>util p95</th><th>util max</th><th>memory p95</th><th>idle</th>"
              "<th>observed</th><th>coverage</th><th>gaps</th><th>idle cost</th></tr>\n");
  for (size_t i = 0; i < r->n_nodes && !o->rc; i++) {
    spill(o, false);
    const struct rs_node *nd = &r->nodes[i];
    svg_outs(o, "<tr><td>");
    svg_outesc(o, nd->name);
    svg_outf(o, "</td><td class=\"n\">%zu</td><td>", nd->n_gpus);
    svg_outesc(o, nd->model);
    svg_outs(o, "</td>");
    wdist(o, &nd->util, RS_HAS_P50, nd->util.p50, 1, "%");
    wdist(o, &nd->util, RS_HAS_P95, nd->util.p95, 1, "%");
    wdist(o, &nd->util, RS_HAS_MAX, nd->util.max, 1, "%");
    wdist(o, &nd->mem_mib, RS_HAS_P95, nd->mem_mib.p95, 0, "MiB");
    if (nd->valid & RS_HAS_IDLE)
      svg_outf(o, "<td class=\"n\">%.0f %%</td>", 100 * nd->idle_fraction);
    else
      svg_outs(o, "<td class=\"n\">\xE2\x80\x94</td>");
    svg_outf(o, "<td class=\"n\">%.1f h</td><td class=\"n\">%.0f %%</td><td class=\"n\">%zu",
             nd->hours_observed, 100 * nd->coverage, nd->n_gaps);
    if (nd->gap_ms > 0) {
      svg_outs(o, " (");
      wduration(o, nd->gap_ms);
      svg_outs(o, ")");
    }
    svg_outs(o, "</td><td class=\"n\">");
    if (nd->valid & RS_HAS_COST)
      wmoney(o, r, nd->idle_cost_window);
    else
      svg_outs(o, "\xE2\x80\x94");
    svg_outs(o, "</td></tr>\n");
  }
  svg_outs(o, "</table>\n");
}

static void workloads_table(struct svg_out *o, const struct rs_report *r) {
  if (!r->n_workloads)
    return;
  svg_outs(o,
           "<h2 id=\"workloads\">Workloads</h2>\n<table>\n<tr><th>namespace/pod</th><th>owner</th>"
           "<th>GPUs</th><th>nodes</th><th>util p95</th><th>util max</th><th>memory p95</th>"
           "<th>memory max</th><th>idle</th><th>observed</th></tr>\n");
  for (size_t i = 0; i < r->n_workloads && !o->rc; i++) {
    spill(o, false);
    const struct rs_workload *wl = &r->workloads[i];
    svg_outs(o, "<tr><td>");
    svg_outesc(o, wl->namespace_);
    svg_outs(o, "/");
    svg_outesc(o, wl->pod);
    svg_outs(o, "</td><td>");
    svg_outesc(o, wl->owner);
    if (wl->owner_source == RS_OWNER_HEURISTIC)
      svg_outs(o, " <span class=\"muted\">(guessed)</span>");
    svg_outf(o, "</td><td class=\"n\">%zu</td><td class=\"n\">%zu</td>", wl->n_gpus, wl->n_nodes);
    wdist(o, &wl->util, RS_HAS_P95, wl->util.p95, 1, "%");
    wdist(o, &wl->util, RS_HAS_MAX, wl->util.max, 1, "%");
    wdist(o, &wl->mem_mib, RS_HAS_P95, wl->mem_mib.p95, 0, "MiB");
    wdist(o, &wl->mem_mib, RS_HAS_MAX, wl->mem_mib.max, 0, "MiB");
    if (wl->valid & RS_HAS_IDLE)
      svg_outf(o, "<td class=\"n\">%.0f %%</td>", 100 * wl->idle_fraction);
    else
      svg_outs(o, "<td class=\"n\">\xE2\x80\x94</td>");
    svg_outf(o, "<td class=\"n\">%.1f h</td></tr>\n", wl->hours_observed);
  }
  svg_outs(o, "</table>\n");
}

static void footer(struct svg_out *o, const struct rs_report *r) {
  const struct rs_params *p = &r->params;
  if (r->n_notes) {
    svg_outs(o, "<h2 id=\"notes\">Notes</h2>\n<ul class=\"notes\">\n");
    for (size_t i = 0; i < r->n_notes; i++) {
      svg_outs(o, "<li>");
      svg_outesc(o, r->notes[i].text);
      svg_outs(o, "</li>\n");
    }
    svg_outs(o, "</ul>\n");
  }
  svg_outs(o, "<h2 id=\"thresholds\">Thresholds</h2>\n<p class=\"meta\">A sample is idle when "
              "utilisation \xE2\x89\xA4 ");
  svg_outf(o, "%g %% and memory used \xE2\x89\xA4 %g %% of the GPU; a node is drained after ",
           p->idle_util_pct, p->idle_mem_pct);
  wduration(o, p->min_idle_ms);
  svg_outf(
      o,
      " of continuous idleness; low use is p95 utilisation \xE2\x89\xA4 %g %%; packing targets "
      "%g %% utilisation and %g %% memory per GPU; no recommendation below %.0f %% coverage. "
      "A MIG slice or time-slice fits when utilisation peaks above its compute share in at most "
      "%g %% of steps. Drain advice needs confidence \xE2\x89\xA5 %g and an idle share "
      "\xE2\x89\xA5 %.0f %%; below either the node is watched. Savings a month = $/hour "
      "\xC3\x97 %.0f h.</p>\n",
      p->low_util_pct, p->pack_util_pct, p->pack_mem_pct, 100 * p->min_coverage,
      100 * p->burst_tolerance, p->drain_min_confidence, 100 * p->drain_min_idle_share,
      RS_HOURS_PER_MONTH);
  svg_outs(o, "</main>\n</body>\n</html>\n");
}

int report_html_stream(const struct rs_report *r, struct buf *out,
                       int (*flush)(void *ud, struct buf *b), void *ud) {
  if (!r || !out)
    return GS_EINVAL;
  struct hout h = {{out, 0}, flush, ud};
  struct svg_out *o = &h.o;
  void (*const part[])(struct svg_out *, const struct rs_report *) = {
      head,      summary,     savings_chart,   recs_table, heatmap,
      timelines, nodes_table, workloads_table, footer};
  for (size_t i = 0; i < sizeof(part) / sizeof(part[0]); i++) {
    part[i](o, r);
    spill(o, false);
  }
  spill(o, true);
  return o->rc;
}

int report_html(const struct rs_report *r, struct buf *out) {
  return report_html_stream(r, out, NULL, NULL);
}
