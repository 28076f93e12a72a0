/* JSON report, schema gpuscale.rightsize/v1 (docs/rightsize.md): absent numbers are left out. */
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "rightsize/report.h"
#include "rightsize/sharepack.h"

static int add(struct json_object *o, const char *k, struct json_object *v) {
  if (!v)
    return GS_ENOMEM;
  return json_object_object_add(o, k, v) == 0 ? 0 : GS_ENOMEM;
}

/* Doubles with a fixed number of decimals, so that 40179.2 is not 40179.199999999997. */
static int num(struct json_object *o, const char *k, double v, int decimals) {
  if (!isfinite(v))
    return 0;
  char t[64];
  snprintf(t, sizeof(t), "%.*f", decimals, v);
  /* trim trailing zeros but keep one decimal digit */
  char *dot = strchr(t, '.');
  if (dot) {
    char *e = t + strlen(t) - 1;
    while (e > dot + 1 && *e == '0')
      *e-- = '\0';
  }
  return add(o, k, json_object_new_double_s(strtod(t, NULL), t));
}

static int str(struct json_object *o, const char *k, const char *v) {
  return add(o, k, json_object_new_string(v));
}

static int i64(struct json_object *o, const char *k, int64_t v) {
  return add(o, k, json_object_new_int64(v));
}

static int iso(struct json_object *o, const char *k, int64_t ms) {
  time_t s = (time_t)(ms / 1000);
  struct tm tm;
  char t[32];
  gmtime_r(&s, &tm);
  strftime(t, sizeof(t), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return str(o, k, t);
}

static struct json_object *dist(const struct rs_dist *d, int dec) {
  struct json_object *o = json_object_new_object();
  if (!o)
    return NULL;
  int rc = i64(o, "samples", (int64_t)d->n);
  if (!rc && (d->valid & RS_HAS_P50))
    rc = num(o, "p50", d->p50, dec);
  if (!rc && (d->valid & RS_HAS_P95))
    rc = num(o, "p95", d->p95, dec);
  if (!rc && (d->valid & RS_HAS_MAX))
    rc = num(o, "max", d->max, dec);
  if (!rc && (d->valid & RS_HAS_MEAN))
    rc = num(o, "mean", d->mean, dec);
  if (rc) {
    json_object_put(o);
    return NULL;
  }
  return o;
}

static struct json_object *idx_array(const size_t *v, size_t n) {
  struct json_object *a = json_object_new_array();
  for (size_t i = 0; a && i < n; i++)
    if (json_object_array_add(a, json_object_new_int64((int64_t)v[i]))) {
      json_object_put(a);
      return NULL;
    }
  return a;
}

static struct json_object *price(const struct rs_price *p) {
  struct json_object *o = json_object_new_object();
  if (!o)
    return NULL;
  int rc = str(o, "source", rs_price_source_name(p->source));
  if (!rc && p->source != RS_PRICE_NONE)
    rc = num(o, "per_gpu_hour", p->per_gpu_hour, 4);
  if (!rc && p->instance_type[0])
    rc = str(o, "instance_type", p->instance_type);
  if (!rc && p->gpus_per_instance)
    rc = i64(o, "gpus_per_instance", p->gpus_per_instance);
  if (rc) {
    json_object_put(o);
    return NULL;
  }
  return o;
}

static struct json_object *gaps(const struct rs_gap *g, size_t n) {
  struct json_object *a = json_object_new_array();
  for (size_t i = 0; a && i < n && i < RS_GAPS_MAX; i++) {
    struct json_object *o = json_object_new_object();
    if (!o || iso(o, "start", g[i].start_ms) || iso(o, "end", g[i].end_ms) ||
        json_object_array_add(a, o)) {
      json_object_put(o);
      json_object_put(a);
      return NULL;
    }
  }
  return a;
}

static int gpu_obj(const struct rs_gpu *g, struct json_object *o) {
  int rc = str(o, "node", g->node);
  rc = rc ? rc : str(o, "gpu", g->gpu);
  if (!rc && g->uuid[0])
    rc = str(o, "uuid", g->uuid);
  if (!rc && g->model[0])
    rc = str(o, "model", g->model);
  if (!rc && g->model_key[0])
    rc = str(o, "model_key", g->model_key);
  if (!rc && g->gpu_i_id[0]) /* a MIG instance: its own row, never merged into its parent */
    rc = str(o, "gpu_i_id", g->gpu_i_id);
  if (!rc && g->gpu_i_profile[0])
    rc = str(o, "gpu_i_profile", g->gpu_i_profile);
  if (!rc && g->mig_parent)
    rc = json_object_object_add(o, "mig_parent", json_object_new_boolean(1)) ? GS_ENOMEM : 0;
  rc = rc ? rc : i64(o, "node_index", (int64_t)g->node_idx);
  rc = rc ? rc : num(o, "hours_observed", g->hours_observed, 3);
  rc = rc ? rc : num(o, "hours_span", g->hours_span, 3);
  rc = rc ? rc : num(o, "coverage", g->coverage, 4);
  rc = rc ? rc : add(o, "util_pct", dist(&g->util, 2));
  rc = rc ? rc : add(o, "mem_used_mib", dist(&g->mem_mib, 1));
  rc = rc ? rc : add(o, "mem_used_pct", dist(&g->mem_pct, 2));
  rc = rc ? rc : add(o, "power_w", dist(&g->power_w, 1));
  if (!rc && (g->valid & RS_HAS_MEM_TOTAL))
    rc = num(o, "mem_total_mib", g->mem_total_mib, 1);
  if (!rc && (g->valid & RS_HAS_IDLE)) {
    rc = num(o, "idle_fraction", g->idle_fraction, 4);
    rc = rc ? rc : num(o, "idle_hours", g->idle_hours, 3);
  }
  if (!rc && (g->valid & RS_HAS_USED_HOURS))
    rc = num(o, "used_gpu_hours", g->used_gpu_hours, 3);
  if (!rc && (g->valid & RS_HAS_STREAK))
    rc = num(o, "idle_streak_hours", (double)g->idle_streak_ms / 3600000.0, 3);
  rc = rc ? rc : i64(o, "gaps_total", (int64_t)g->n_gaps);
  rc = rc ? rc : num(o, "gap_hours", (double)g->gap_ms / 3600000.0, 3);
  rc = rc ? rc : add(o, "gaps", gaps(g->gaps, g->n_gaps));
  rc = rc ? rc : add(o, "workloads", idx_array(g->workloads, g->n_workloads));
  rc = rc ? rc : add(o, "price", price(&g->price));
  if (!rc && (g->valid & RS_HAS_COST)) {
    rc = num(o, "cost_window", g->cost_window, 2);
    rc = rc ? rc : num(o, "idle_cost_window", g->idle_cost_window, 2);
  }
  return rc;
}

static int node_obj(const struct rs_node *n, struct json_object *o) {
  int rc = str(o, "name", n->name);
  if (!rc && n->model[0])
    rc = str(o, "model", n->model);
  if (!rc && n->model_key[0])
    rc = str(o, "model_key", n->model_key);
  rc = rc ? rc : add(o, "gpus", idx_array(n->gpus, n->n_gpus));
  rc = rc ? rc : num(o, "hours_observed", n->hours_observed, 3);
  rc = rc ? rc : num(o, "coverage", n->coverage, 4);
  rc = rc ? rc : add(o, "util_pct", dist(&n->util, 2));
  rc = rc ? rc : add(o, "mem_used_mib", dist(&n->mem_mib, 1));
  if (!rc && (n->valid & RS_HAS_IDLE))
    rc = num(o, "idle_fraction", n->idle_fraction, 4);
  if (!rc && (n->valid & RS_HAS_USED_HOURS))
    rc = num(o, "used_gpu_hours", n->used_gpu_hours, 3);
  if (!rc && (n->valid & RS_HAS_STREAK))
    rc = num(o, "idle_streak_hours", (double)n->idle_streak_ms / 3600000.0, 3);
  rc = rc ? rc : i64(o, "gaps_total", (int64_t)n->n_gaps);
  rc = rc ? rc : num(o, "gap_hours", (double)n->gap_ms / 3600000.0, 3);
  rc = rc ? rc : add(o, "price", price(&n->price));
  if (!rc && (n->valid & RS_HAS_COST)) {
    rc = num(o, "price_per_hour", n->price.per_gpu_hour * (double)n->n_gpus, 4);
    rc = rc ? rc : num(o, "cost_window", n->cost_window, 2);
    rc = rc ? rc : num(o, "idle_cost_window", n->idle_cost_window, 2);
  }
  return rc;
}

static int wl_obj(const struct rs_workload *w, struct json_object *o) {
  int rc = str(o, "namespace", w->namespace_);
  rc = rc ? rc : str(o, "pod", w->pod);
  if (!rc && w->container[0])
    rc = str(o, "container", w->container);
  rc = rc ? rc : str(o, "owner", w->owner);
  rc = rc ? rc : str(o, "owner_source", rs_owner_source_name(w->owner_source));
  rc = rc ? rc : add(o, "gpus", idx_array(w->gpus, w->n_gpus));
  rc = rc ? rc : i64(o, "nodes", (int64_t)w->n_nodes);
  rc = rc ? rc : num(o, "hours_observed", w->hours_observed, 3);
  rc = rc ? rc : add(o, "util_pct", dist(&w->util, 2));
  rc = rc ? rc : add(o, "mem_used_mib", dist(&w->mem_mib, 1));
  if (!rc && (w->valid & RS_HAS_IDLE))
    rc = num(o, "idle_fraction", w->idle_fraction, 4);
  if (!rc && (w->valid & RS_HAS_USED_HOURS))
    rc = num(o, "used_gpu_hours", w->used_gpu_hours, 3);
  return rc;
}

static struct json_object *evidence(const struct rs_evidence *e, const char *text) {
  struct json_object *o = json_object_new_object();
  if (!o)
    return NULL;
  int rc = str(o, "text", text);
  if (!rc && (e->valid & RS_EV_UTIL_P95))
    rc = num(o, "util_p95", e->util_p95, 2);
  if (!rc && (e->valid & RS_EV_UTIL_MAX))
    rc = num(o, "util_max", e->util_max, 2);
  if (!rc && (e->valid & RS_EV_MEM_P95))
    rc = num(o, "mem_p95_mib", e->mem_p95_mib, 1);
  if (!rc && (e->valid & RS_EV_MEM_MAX))
    rc = num(o, "mem_max_mib", e->mem_max_mib, 1);
  if (!rc && (e->valid & RS_EV_IDLE_FRACTION))
    rc = num(o, "idle_fraction", e->idle_fraction, 4);
  if (!rc && (e->valid & RS_EV_IDLE_STREAK))
    rc = num(o, "idle_streak_hours", (double)e->idle_streak_ms / 3600000.0, 3);
  if (!rc && (e->valid & RS_EV_HOURS))
    rc = num(o, "hours_observed", e->hours_observed, 3);
  if (!rc && (e->valid & RS_EV_COVERAGE))
    rc = num(o, "coverage", e->coverage, 4);
  if (!rc && (e->valid & RS_EV_BURST)) {
    rc = num(o, "burst_limit_pct", e->burst_limit_pct, 2);
    rc = rc ? rc : num(o, "burst_share", e->burst_share, 5);
  }
  rc = rc ? rc : i64(o, "gaps", (int64_t)e->n_gaps);
  if (rc) {
    json_object_put(o);
    return NULL;
  }
  return o;
}

/* Where the packing of the recommendation's group puts its slices (see sharepack.h). */
static struct json_object *packing(const struct rs_report *r, const struct rs_rec *c) {
  struct json_object *o = json_object_new_object(), *sl = json_object_new_array();
  if (!o || !sl) {
    json_object_put(o);
    json_object_put(sl);
    return NULL;
  }
  int rc = str(o, "group", c->pack_group);
  rc = rc ? rc : i64(o, "group_gpus_before", (int64_t)c->pack_gpus_before);
  rc = rc ? rc : i64(o, "group_gpus_after", (int64_t)c->pack_gpus_after);
  rc = rc ? rc : num(o, "gpus_freed", c->pack_gpus_freed, 4);
  rc = rc ? rc : add(o, "shared", json_object_new_boolean(c->pack_shared));
  for (size_t i = 0; !rc && i < c->n_slots; i++) {
    struct json_object *x = json_object_new_object();
    rc = x ? 0 : GS_ENOMEM;
    rc = rc ? rc : i64(x, "card", (int64_t)c->slots[i].card);
    if (!rc && c->kind == RS_REC_MIG) {
      rc = i64(x, "start", c->slots[i].start);
      rc = rc ? rc : i64(x, "mem_slices", c->slots[i].mem_slices);
    }
    if (!rc)
      json_object_array_add(sl, x);
    else
      json_object_put(x);
  }
  rc = rc ? rc : add(o, "slots", sl);
  rc = rc ? rc : add(o, "mates", idx_array(c->mates, c->n_mates));
  char d[RS_TEXT_MAX];
  rs_pack_describe(r, c, d, sizeof(d));
  rc = rc ? rc : str(o, "text", d);
  if (rc) {
    json_object_put(o);
    return NULL;
  }
  return o;
}

static int rec_obj(const struct rs_report *r, const struct rs_rec *c, struct json_object *o) {
  int rc = str(o, "kind", rs_rec_kind_name(c->kind));
  if (c->kind == RS_REC_IDLE_NODE || c->kind == RS_REC_WATCH_NODE) {
    rc = rc ? rc : str(o, "node", r->nodes[c->node_idx].name);
    rc = rc ? rc : i64(o, "node_index", (int64_t)c->node_idx);
  } else if (c->kind != RS_REC_CONSOLIDATE && c->workload_idx < r->n_workloads) {
    const struct rs_workload *w = &r->workloads[c->workload_idx];
    rc = rc ? rc : str(o, "namespace", w->namespace_);
    rc = rc ? rc : str(o, "pod", w->pod);
    rc = rc ? rc : str(o, "owner", w->owner);
    rc = rc ? rc : i64(o, "workload_index", (int64_t)c->workload_idx);
    if (c->node_idx < r->n_nodes)
      rc = rc ? rc : str(o, "node", r->nodes[c->node_idx].name);
  }
  if (c->n_nodes) {
    struct json_object *a = json_object_new_array();
    for (size_t i = 0; a && i < c->n_nodes; i++)
      json_object_array_add(a, json_object_new_string(r->nodes[c->nodes[i]].name));
    rc = rc ? rc : add(o, c->kind == RS_REC_CONSOLIDATE ? "nodes_freed" : "nodes", a);
  }
  if (!rc && c->kind == RS_REC_CONSOLIDATE) {
    rc = add(o, "workloads", idx_array(c->workloads, c->n_workloads));
    rc = rc ? rc : add(o, "gpus_freed", idx_array(c->gpus, c->n_gpus));
    rc = rc ? rc : i64(o, "gpus_before", (int64_t)c->gpus_before);
    rc = rc ? rc : i64(o, "gpus_after", (int64_t)c->gpus_after);
  }
  if (!rc && c->kind == RS_REC_MIG) {
    rc = str(o, "mig_profile", c->mig_profile);
    rc = rc ? rc : i64(o, "mig_compute_sevenths", c->mig_compute_sevenths);
    rc = rc ? rc : num(o, "mig_mem_gb", c->mig_mem_gb, 1);
  }
  if (!rc && (c->kind == RS_REC_MIG || c->kind == RS_REC_TIMESLICE)) {
    rc = i64(o, "share_ways", c->share_ways);
    if (!rc && c->n_slots)
      rc = add(o, "packing", packing(r, c));
  }
  if (!rc && c->kind == RS_REC_CHEAPER_GPU)
    rc = str(o, "target_model", c->target_model);
  rc = rc ? rc : str(o, "reason", c->reason);
  rc = rc ? rc : add(o, "evidence", evidence(&c->evidence, c->evidence_text));
  if (!rc && (c->valid & RS_REC_HAS_SAVINGS))
    rc = num(o, "savings_month", c->savings_month, 2);
  rc = rc ? rc : num(o, "confidence", c->confidence, 3);
  rc = rc ? rc : str(o, "confidence_level", rs_confidence_name(c->confidence_level));
  return rc;
}

static struct json_object *summary(const struct rs_report *r) {
  const struct rs_summary *s = &r->summary;
  struct json_object *o = json_object_new_object();
  if (!o)
    return NULL;
  int rc = i64(o, "nodes", (int64_t)s->n_nodes);
  rc = rc ? rc : i64(o, "gpus", (int64_t)s->n_gpus);
  rc = rc ? rc : i64(o, "workloads", (int64_t)s->n_workloads);
  rc = rc ? rc : i64(o, "recommendations", (int64_t)s->n_recs);
  rc = rc ? rc : i64(o, "gpus_unpriced", (int64_t)s->n_gpus_unpriced);
  rc = rc ? rc : num(o, "gpu_hours_paid", s->gpu_hours_paid, 3);
  rc = rc ? rc : num(o, "gpu_hours_observed", s->gpu_hours_observed, 3);
  rc = rc ? rc : num(o, "gpu_hours_used", s->gpu_hours_used, 3);
  rc = rc ? rc : num(o, "gpu_hours_idle", s->gpu_hours_idle, 3);
  if (!rc && (s->valid & RS_SUM_HAS_COST)) {
    rc = num(o, "cost_window", s->cost_window, 2);
    rc = rc ? rc : num(o, "idle_cost_window", s->idle_cost_window, 2);
    rc = rc ? rc : num(o, "cost_month", s->cost_month, 2);
    rc = rc ? rc : num(o, "idle_cost_month", s->idle_cost_month, 2);
  }
  if (!rc && (s->valid & RS_SUM_HAS_SAVINGS)) {
    rc = num(o, "savings_month", s->savings_month, 2);
    struct json_object *k = json_object_new_object();
    for (int i = 0; !rc && k && i < RS_REC_KIND_COUNT; i++)
      rc = num(k, rs_rec_kind_name((enum rs_rec_kind)i), s->savings_month_by_kind[i], 2);
    rc = rc ? rc : add(o, "savings_month_by_kind", k);
  }
  struct json_object *k = json_object_new_object();
  for (int i = 0; !rc && k && i < RS_REC_KIND_COUNT; i++)
    rc = i64(k, rs_rec_kind_name((enum rs_rec_kind)i), (int64_t)s->recs_by_kind[i]);
  rc = rc ? rc : add(o, "recommendations_by_kind", k);
  if (rc) {
    json_object_put(o);
    return NULL;
  }
  return o;
}

static struct json_object *params(const struct rs_report *r) {
  const struct rs_params *p = &r->params;
  struct json_object *o = json_object_new_object();
  if (!o)
    return NULL;
  int rc = num(o, "window_hours", (double)p->window_ms / 3600000.0, 3);
  rc = rc ? rc : num(o, "step_seconds", (double)p->step_ms / 1000.0, 3);
  rc = rc ? rc : num(o, "min_idle_hours", (double)p->min_idle_ms / 3600000.0, 3);
  rc = rc ? rc : num(o, "idle_util_pct", p->idle_util_pct, 2);
  rc = rc ? rc : num(o, "idle_mem_pct", p->idle_mem_pct, 2);
  rc = rc ? rc : num(o, "low_util_pct", p->low_util_pct, 2);
  rc = rc ? rc : num(o, "pack_util_pct", p->pack_util_pct, 2);
  rc = rc ? rc : num(o, "pack_mem_pct", p->pack_mem_pct, 2);
  rc = rc ? rc : num(o, "min_coverage", p->min_coverage, 3);
  rc = rc ? rc : num(o, "burst_tolerance", p->burst_tolerance, 4);
  rc = rc ? rc : num(o, "drain_min_confidence", p->drain_min_confidence, 3);
  rc = rc ? rc : num(o, "drain_min_idle_share", p->drain_min_idle_share, 3);
  rc = rc ? rc : num(o, "hours_per_month", RS_HOURS_PER_MONTH, 1);
  if (rc) {
    json_object_put(o);
    return NULL;
  }
  return o;
}

/* Appends s, indented by `indent` more spaces after each line break: an element rendered alone by
 * json-c at level 0 becomes the same text json-c writes for it at level indent / 2 (strings hold no
 * raw line break; json-c escapes them). */
static int put_indented(struct buf *out, const char *s, const char *indent) {
  int rc = 0;
  for (const char *nl; !rc && (nl = strchr(s, '\n')) != NULL; s = nl + 1) {
    rc = buf_append(out, s, (size_t)(nl - s) + 1);
    rc = rc ? rc : buf_puts(out, indent);
  }
  return rc ? rc : buf_puts(out, s);
}

#define JSON_FLAGS                                                                                 \
  (JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE)

/* The report is written one element at a time, never as one tree: a tree of 10 000 GPUs and its
 * text took several times the report's size. Each element is rendered alone and re-indented, so
 * the text is byte for byte what json-c writes for the whole tree. */
struct jout {
  struct buf *b;
  int (*flush)(void *ud, struct buf *b);
  void *ud;
};

static int jflush(struct jout *j, bool always) {
  if (!j->flush || (!always && j->b->len < ((size_t)256 << 10)))
    return 0;
  int rc = j->flush(j->ud, j->b);
  buf_reset(j->b);
  return rc;
}

/* One element of a top-level array (level 2 of the page), after its separator. */
static int jelem(struct jout *j, struct json_object *o, size_t i) {
  if (!o)
    return GS_ENOMEM;
  const char *s = json_object_to_json_string_ext(o, JSON_FLAGS);
  int rc = s ? buf_puts(j->b, i ? ",\n    " : "\n    ") : GS_ENOMEM;
  rc = rc ? rc : put_indented(j->b, s, "    ");
  json_object_put(o);
  return rc ? rc : jflush(j, false);
}

/* `"key": [` ... `]` at level 1, n elements made by make(i). */
static int jarray(struct jout *j, const char *key, size_t n,
                  struct json_object *(*make)(const struct rs_report *r, size_t i),
                  const struct rs_report *r) {
  int rc = buf_printf(j->b, ",\n  \"%s\": [", key);
  for (size_t i = 0; !rc && i < n; i++)
    rc = jelem(j, make(r, i), i);
  return rc ? rc : buf_puts(j->b, "\n  ]"); /* json-c: "[\n  ]" when empty too */
}

/* One element's object, or NULL (ENOMEM, or its writer's error). */
static struct json_object *made(struct json_object *o, int rc) {
  if (o && rc) {
    json_object_put(o);
    return NULL;
  }
  return o;
}
static struct json_object *make_rec(const struct rs_report *r, size_t i) {
  struct json_object *o = json_object_new_object();
  return made(o, o ? rec_obj(r, &r->recs[i], o) : 0);
}
static struct json_object *make_node(const struct rs_report *r, size_t i) {
  struct json_object *o = json_object_new_object();
  return made(o, o ? node_obj(&r->nodes[i], o) : 0);
}
static struct json_object *make_gpu(const struct rs_report *r, size_t i) {
  struct json_object *o = json_object_new_object();
  return made(o, o ? gpu_obj(&r->gpus[i], o) : 0);
}
static struct json_object *make_wl(const struct rs_report *r, size_t i) {
  struct json_object *o = json_object_new_object();
  return made(o, o ? wl_obj(&r->workloads[i], o) : 0);
}
static struct json_object *make_note(const struct rs_report *r, size_t i) {
  return json_object_new_string(r->notes[i].text);
}

int report_json_stream(const struct rs_report *r, struct buf *out,
                       int (*flush)(void *ud, struct buf *b), void *ud) {
  struct jout j = {out, flush, ud};
  struct json_object *root = json_object_new_object();
  if (!root)
    return GS_ENOMEM;
  int rc = str(root, "schema", RS_SCHEMA);
  rc = rc ? rc : iso(root, "generated", r->generated_ms);
  rc = rc ? rc : str(root, "prometheus", r->source_url);
  rc = rc ? rc : iso(root, "start", r->start_ms);
  rc = rc ? rc : iso(root, "end", r->end_ms);
  rc = rc ? rc : str(root, "currency", r->currency);
  rc = rc ? rc : str(root, "prices", r->price_source);
  rc = rc ? rc : add(root, "params", params(r));
  rc = rc ? rc : add(root, "summary", summary(r));
  if (!rc) { /* the head, without its closing "\n}" */
    const char *s = json_object_to_json_string_ext(root, JSON_FLAGS);
    size_t n = s ? strlen(s) : 0;
    rc = n >= 2 && !strcmp(s + n - 2, "\n}") ? buf_append(out, s, n - 2) : GS_ENOMEM;
  }
  json_object_put(root);
  rc = rc ? rc : jarray(&j, "recommendations", r->n_recs, make_rec, r);
  rc = rc ? rc : jarray(&j, "nodes", r->n_nodes, make_node, r);
  rc = rc ? rc : jarray(&j, "gpus", r->n_gpus, make_gpu, r);
  rc = rc ? rc : jarray(&j, "workloads", r->n_workloads, make_wl, r);
  rc = rc ? rc : jarray(&j, "notes", r->n_notes, make_note, r);
  rc = rc ? rc : buf_puts(out, "\n}\n");
  return rc ? rc : jflush(&j, true);
}

int report_json(const struct rs_report *r, struct buf *out) {
  return report_json_stream(r, out, NULL, NULL);
}
