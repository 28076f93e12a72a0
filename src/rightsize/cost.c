/* GPU catalogue, price table (built-in and YAML file) and the report's cost figures. */
#include "rightsize/cost.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "core/err.h"

#define PRICES_FILE_MAX (1 << 20)

/* Memory is what FB_USED + FB_FREE add up to on these boards (MiB, rounded); compute is dense
 * FP16/BF16 tensor throughput from NVIDIA's data sheets relative to H100 SXM (989 TFLOPS):
 * H200 989, A100 312, L4 121, T4 65. It is a coarse scale for "does this load fit", not a
 * benchmark. */
static const struct rs_gpu_spec specs[] = {
    {"H100-80GB", 81559, 1.0, true, false},
    {"H200-141GB", 143771, 1.0, true, false},
    {"A100-40GB", 40960, 0.315, true, false},
    {"A100-80GB", 81920, 0.315, true, false},
    {"L4", 23034, 0.122, false, false},
    {"T4", 15360, 0.066, false, false},
    /* AMD Instinct: memory is what gpu_used_vram + gpu_free_vram add up to (MiB, approximate:
     * the HBM of AMD's data sheets less what the driver keeps); compute is dense FP16 matrix
     * throughput from AMD's data sheets relative to H100 SXM: MI325X and MI300X 1307.4, MI250X
     * 383 per package (ROCm sees each of its two GCDs as a GPU: 191.5 and 64 GB each), MI210 181.
     * No MIG: their compute partitions are not MIG profiles. */
    {"MI325X-256GB", 262144, 1.32, false, true},
    {"MI300X-192GB", 196592, 1.32, false, true},
    {"MI250X-GCD-64GB", 65520, 0.194, false, true},
    {"MI210-64GB", 65520, 0.183, false, true},
};

const struct rs_gpu_spec *rs_gpu_spec_find(const char *key) {
  for (size_t i = 0; key && i < sizeof(specs) / sizeof(specs[0]); i++)
    if (!strcmp(specs[i].key, key))
      return &specs[i];
  return NULL;
}

static bool has_word(const char *up, const char *w) {
  return strstr(up, w) != NULL;
}

void rs_model_key(const char *model_name, char *out, size_t outlen) {
  char up[128];
  size_t i = 0;
  for (; model_name && model_name[i] && i + 1 < sizeof(up); i++)
    up[i] = (char)toupper((unsigned char)model_name[i]);
  up[i] = '\0';
  const char *k = "";
  /* AMD: ROCm SMI's device name, AMD's exporter's card_model ("AMD Instinct MI300X"). The MI250
   * (without X) and the MI300A have no entry: unknown, never taken for a neighbour. */
  if (has_word(up, "MI325X"))
    k = "MI325X-256GB";
  else if (has_word(up, "MI300X"))
    k = "MI300X-192GB";
  else if (has_word(up, "MI250X"))
    k = "MI250X-GCD-64GB";
  else if (has_word(up, "MI210"))
    k = "MI210-64GB";
  else if (has_word(up, "H200"))
    k = "H200-141GB";
  else if (has_word(up, "H100"))
    k = "H100-80GB";
  else if (has_word(up, "A100"))
    k = has_word(up, "80G") ? "A100-80GB" : "A100-40GB";
  else if (has_word(up, "L40"))
    k = "";
  else if (has_word(up, "L4"))
    k = "L4";
  else if (has_word(up, "T4"))
    k = "T4";
  /* keys themselves normalise to themselves */
  if (!*k && rs_gpu_spec_find(model_name))
    k = model_name;
  snprintf(out, outlen, "%s", k);
}

/* ---- price table --------------------------------------------------------------------------- */

struct price_inst {
  char name[RS_SHORT_MAX];
  char model[RS_SHORT_MAX];
  double hourly;
  unsigned gpus;
  bool builtin;
};
struct price_model {
  char name[RS_SHORT_MAX];
  double per_gpu_hour;
};
struct price_node {
  char node[RS_NAME_MAX];
  char instance[RS_SHORT_MAX];
};

struct rs_prices {
  char currency[8];
  struct price_inst *inst;
  size_t n_inst;
  struct price_model *models;
  size_t n_models;
  struct price_node *nodes;
  size_t n_nodes;
};

/* AWS us-east-1 on-demand, from Karpenter's generated price list, 2026; AMD Instinct: AWS has
 * none, so Oracle Cloud's on-demand list price (oracle.com/cloud/price-list, "Compute - GPU -
 * MI300X": BM.GPU.MI300X.8, USD 6.00 per GPU hour). Examples to replace. MI325X, MI250X and MI210
 * have no hyperscaler on-demand list price to cite: they are unpriced until --prices names them. */
static const struct {
  const char *name, *model;
  double hourly;
  unsigned gpus;
} builtin_inst[] = {
    {"p5.48xlarge", "H100-80GB", 55.04, 8},
    {"p5en.48xlarge", "H200-141GB", 63.296, 8},
    {"p4d.24xlarge", "A100-40GB", 21.96, 8},
    {"p4de.24xlarge", "A100-80GB", 27.45, 8},
    {"g6.xlarge", "L4", 0.8048, 1},
    {"g4dn.xlarge", "T4", 0.526, 1},
    {"BM.GPU.MI300X.8", "MI300X-192GB", 48.0, 8},
};

struct rs_prices *rs_prices_builtin(void) {
  struct rs_prices *p = calloc(1, sizeof(*p));
  size_t n = sizeof(builtin_inst) / sizeof(builtin_inst[0]);
  if (!p || !(p->inst = calloc(n, sizeof(*p->inst)))) {
    free(p);
    return NULL;
  }
  snprintf(p->currency, sizeof(p->currency), "USD");
  for (size_t i = 0; i < n; i++) {
    snprintf(p->inst[i].name, sizeof(p->inst[i].name), "%s", builtin_inst[i].name);
    snprintf(p->inst[i].model, sizeof(p->inst[i].model), "%s", builtin_inst[i].model);
    p->inst[i].hourly = builtin_inst[i].hourly;
    p->inst[i].gpus = builtin_inst[i].gpus;
    p->inst[i].builtin = true;
  }
  p->n_inst = n;
  return p;
}

void rs_prices_free(struct rs_prices *p) {
  if (!p)
    return;
  free(p->inst);
  free(p->models);
  free(p->nodes);
  free(p);
}

const char *rs_prices_currency(const struct rs_prices *p) {
  return p ? p->currency : "USD";
}

static const struct price_inst *inst_find(const struct rs_prices *p, const char *name) {
  /* file entries come after the built-in ones and win */
  for (size_t i = p->n_inst; i-- > 0;)
    if (!strcmp(p->inst[i].name, name))
      return &p->inst[i];
  return NULL;
}

static void from_inst(const struct price_inst *in, struct rs_price *out) {
  out->source = in->builtin ? RS_PRICE_BUILTIN : RS_PRICE_FILE_INSTANCE;
  out->per_gpu_hour = in->hourly / in->gpus;
  out->gpus_per_instance = in->gpus;
  snprintf(out->instance_type, sizeof(out->instance_type), "%s", in->name);
}

int rs_price_lookup(const struct rs_prices *p, const char *node, const char *key,
                    const char *model_name, struct rs_price *out) {
  memset(out, 0, sizeof(*out));
  if (!p)
    return GS_ENOTFOUND;
  for (size_t i = 0; node && i < p->n_nodes; i++) {
    if (strcmp(p->nodes[i].node, node))
      continue;
    const struct price_inst *in = inst_find(p, p->nodes[i].instance);
    if (in) {
      from_inst(in, out);
      return 0;
    }
  }
  for (size_t i = 0; i < p->n_models; i++) {
    if ((key && *key && !strcmp(p->models[i].name, key)) ||
        (model_name && *model_name && !strcmp(p->models[i].name, model_name))) {
      out->source = RS_PRICE_FILE_MODEL;
      out->per_gpu_hour = p->models[i].per_gpu_hour;
      return 0;
    }
  }
  if (!key || !*key)
    return GS_ENOTFOUND;
  for (int pass = 0; pass < 2; pass++) /* file instances first, then built-in */
    for (size_t i = p->n_inst; i-- > 0;)
      if (p->inst[i].builtin == (pass == 1) && !strcmp(p->inst[i].model, key)) {
        from_inst(&p->inst[i], out);
        return 0;
      }
  return GS_ENOTFOUND;
}

int rs_price_of_model(const struct rs_prices *p, const char *key, double *per_gpu_hour) {
  struct rs_price pr;
  int rc = rs_price_lookup(p, NULL, key, NULL, &pr);
  if (rc == 0)
    *per_gpu_hour = pr.per_gpu_hour;
  return rc;
}

/* ---- YAML price file ------------------------------------------------------------------------ */

static const char *scalar(yaml_node_t *n) {
  return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static int parse_price(yaml_node_t *n, const char *what, double *out, char *err, size_t errlen) {
  const char *s = scalar(n);
  char *end = NULL;
  errno = 0;
  double v = s ? strtod(s, &end) : NAN;
  if (!s || end == s || *end || errno || !isfinite(v) || v < 0 || v > 1e6) {
    snprintf(err, errlen, "line %lu: %s: price must be a number of $/hour in [0, 1e6], got \"%s\"",
             n ? (unsigned long)n->start_mark.line + 1 : 0UL, what, s ? s : "(not a scalar)");
    return GS_EINVAL;
  }
  *out = v;
  return 0;
}

static int load_models(struct rs_prices *p, yaml_document_t *d, yaml_node_t *map, char *err,
                       size_t errlen) {
  for (yaml_node_pair_t *pr = map->data.mapping.pairs.start; pr < map->data.mapping.pairs.top;
       pr++) {
    const char *k = scalar(yaml_document_get_node(d, pr->key));
    if (!k || strlen(k) >= RS_SHORT_MAX) {
      snprintf(err, errlen, "models: keys must be GPU model names shorter than %d bytes",
               RS_SHORT_MAX);
      return GS_EINVAL;
    }
    double v;
    int rc = parse_price(yaml_document_get_node(d, pr->value), k, &v, err, errlen);
    if (rc)
      return rc;
    struct price_model *nm = realloc(p->models, (p->n_models + 1) * sizeof(*nm));
    if (!nm)
      return GS_ENOMEM;
    p->models = nm;
    char key[RS_SHORT_MAX];
    rs_model_key(k, key, sizeof(key));
    snprintf(nm[p->n_models].name, RS_SHORT_MAX, "%s", *key ? key : k);
    nm[p->n_models++].per_gpu_hour = v;
  }
  return 0;
}

static int load_instances(struct rs_prices *p, yaml_document_t *d, yaml_node_t *map, char *err,
                          size_t errlen) {
  for (yaml_node_pair_t *pr = map->data.mapping.pairs.start; pr < map->data.mapping.pairs.top;
       pr++) {
    const char *k = scalar(yaml_document_get_node(d, pr->key));
    yaml_node_t *v = yaml_document_get_node(d, pr->value);
    if (!k || strlen(k) >= RS_SHORT_MAX || !v || v->type != YAML_MAPPING_NODE) {
      snprintf(err, errlen,
               "line %lu: instances: each entry is NAME: {price: $/h, gpus: N, model: MODEL}",
               v ? (unsigned long)v->start_mark.line + 1 : 0UL);
      return GS_EINVAL;
    }
    struct price_inst in = {0};
    snprintf(in.name, sizeof(in.name), "%s", k);
    bool have_price = false;
    for (yaml_node_pair_t *q = v->data.mapping.pairs.start; q < v->data.mapping.pairs.top; q++) {
      const char *f = scalar(yaml_document_get_node(d, q->key));
      yaml_node_t *fv = yaml_document_get_node(d, q->value);
      if (f && !strcmp(f, "price")) {
        int rc = parse_price(fv, k, &in.hourly, err, errlen);
        if (rc)
          return rc;
        have_price = true;
      } else if (f && !strcmp(f, "gpus")) {
        const char *s = scalar(fv);
        char *end = NULL;
        long g = s ? strtol(s, &end, 10) : 0;
        if (!s || *end || g < 1 || g > 64) {
          snprintf(err, errlen, "instances: %s: gpus must be 1..64, got \"%s\"", k,
                   s ? s : "(not a scalar)");
          return GS_EINVAL;
        }
        in.gpus = (unsigned)g;
      } else if (f && !strcmp(f, "model")) {
        const char *s = scalar(fv);
        if (!s) {
          snprintf(err, errlen, "instances: %s: model must be a string", k);
          return GS_EINVAL;
        }
        rs_model_key(s, in.model, sizeof(in.model));
        if (!in.model[0])
          snprintf(in.model, sizeof(in.model), "%s", s);
      } else {
        snprintf(err, errlen, "instances: %s: unknown field \"%s\" (allowed: price, gpus, model)",
                 k, f ? f : "?");
        return GS_EINVAL;
      }
    }
    if (!have_price || !in.gpus) {
      snprintf(err, errlen, "instances: %s: needs both price and gpus", k);
      return GS_EINVAL;
    }
    struct price_inst *ni = realloc(p->inst, (p->n_inst + 1) * sizeof(*ni));
    if (!ni)
      return GS_ENOMEM;
    p->inst = ni;
    ni[p->n_inst++] = in;
  }
  return 0;
}

static int load_nodes(struct rs_prices *p, yaml_document_t *d, yaml_node_t *map, char *err,
                      size_t errlen) {
  for (yaml_node_pair_t *pr = map->data.mapping.pairs.start; pr < map->data.mapping.pairs.top;
       pr++) {
    const char *k = scalar(yaml_document_get_node(d, pr->key));
    const char *v = scalar(yaml_document_get_node(d, pr->value));
    if (!k || !v || strlen(k) >= RS_NAME_MAX || strlen(v) >= RS_SHORT_MAX) {
      snprintf(err, errlen, "nodes: each entry is NODE: INSTANCE-TYPE");
      return GS_EINVAL;
    }
    struct price_node *nn = realloc(p->nodes, (p->n_nodes + 1) * sizeof(*nn));
    if (!nn)
      return GS_ENOMEM;
    p->nodes = nn;
    snprintf(nn[p->n_nodes].node, RS_NAME_MAX, "%s", k);
    snprintf(nn[p->n_nodes].instance, RS_SHORT_MAX, "%s", v);
    p->n_nodes++;
  }
  return 0;
}

int rs_prices_parse(const char *text, size_t len, struct rs_prices **out, char *err,
                    size_t errlen) {
  *out = NULL;
  struct rs_prices *p = rs_prices_builtin();
  if (!p)
    return GS_ENOMEM;
  yaml_parser_t parser;
  yaml_document_t doc;
  if (!yaml_parser_initialize(&parser)) {
    rs_prices_free(p);
    return GS_ENOMEM;
  }
  yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
  if (!yaml_parser_load(&parser, &doc)) {
    snprintf(err, errlen, "line %lu: %s", (unsigned long)parser.problem_mark.line + 1,
             parser.problem ? parser.problem : "YAML error");
    yaml_parser_delete(&parser);
    rs_prices_free(p);
    return GS_EPARSE;
  }
  int rc = 0;
  yaml_node_t *root = yaml_document_get_root_node(&doc);
  if (root && root->type != YAML_MAPPING_NODE) {
    snprintf(err, errlen,
             "the price file must be a mapping with currency, models, instances, "
             "nodes");
    rc = GS_EPARSE;
  }
  for (yaml_node_pair_t *pr = root && !rc ? root->data.mapping.pairs.start : NULL;
       pr && pr < root->data.mapping.pairs.top && !rc; pr++) {
    const char *k = scalar(yaml_document_get_node(&doc, pr->key));
    yaml_node_t *v = yaml_document_get_node(&doc, pr->value);
    bool is_map = v && v->type == YAML_MAPPING_NODE;
    if (k && !strcmp(k, "currency") && scalar(v) && strlen(scalar(v)) < sizeof(p->currency)) {
      snprintf(p->currency, sizeof(p->currency), "%s", scalar(v));
    } else if (k && !strcmp(k, "models") && is_map) {
      rc = load_models(p, &doc, v, err, errlen);
    } else if (k && !strcmp(k, "instances") && is_map) {
      rc = load_instances(p, &doc, v, err, errlen);
    } else if (k && !strcmp(k, "nodes") && is_map) {
      rc = load_nodes(p, &doc, v, err, errlen);
    } else {
      snprintf(err, errlen,
               "line %lu: unknown or malformed key \"%s\" (allowed: currency: CODE, models: {}, "
               "instances: {}, nodes: {})",
               v ? (unsigned long)v->start_mark.line + 1 : 0UL, k ? k : "?");
      rc = GS_EPARSE;
    }
  }
  yaml_document_delete(&doc);
  yaml_parser_delete(&parser);
  if (rc) {
    rs_prices_free(p);
    return rc;
  }
  *out = p;
  return 0;
}

int rs_prices_load(const char *path, struct rs_prices **out, char *err, size_t errlen) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "cannot read price file %s: %s", path, strerror(errno));
    return GS_EIO;
  }
  char *text = malloc(PRICES_FILE_MAX + 1);
  size_t n = text ? fread(text, 1, PRICES_FILE_MAX + 1, f) : 0;
  bool bad = ferror(f) != 0;
  fclose(f);
  if (!text)
    return GS_ENOMEM;
  if (bad) {
    free(text);
    snprintf(err, errlen, "cannot read price file %s: %s", path, strerror(errno));
    return GS_EIO;
  }
  if (n > PRICES_FILE_MAX) {
    free(text);
    snprintf(err, errlen, "price file %s is larger than %d bytes", path, PRICES_FILE_MAX);
    return GS_ETOOBIG;
  }
  char perr[400] = "";
  int rc = rs_prices_parse(text, n, out, perr, sizeof(perr));
  free(text);
  if (rc)
    snprintf(err, errlen, "price file %s: %s", path, perr);
  return rc;
}

/* ---- report costs --------------------------------------------------------------------------- */

/* The compute share of a MIG profile "<n>g.<mem>gb": n/7 of the card; NAN when unknown. */
static double mig_share(const char *profile) {
  char *end = NULL;
  long n = strtol(profile, &end, 10);
  if (end == profile || *end != 'g' || n < 1 || n > 7)
    return NAN;
  return (double)n / 7.0;
}

void rs_cost_apply(struct rs_report *r, const struct rs_prices *p) {
  if (p)
    snprintf(r->currency, sizeof(r->currency), "%s", p->currency);
  for (size_t i = 0; i < r->n_gpus; i++) {
    struct rs_gpu *g = &r->gpus[i];
    g->valid &= ~(unsigned)RS_HAS_COST;
    if (g->mig_has_parent) { /* the card is paid once, on its parent row */
      memset(&g->price, 0, sizeof(g->price));
      continue;
    }
    if (rs_price_lookup(p, g->node, g->model_key, g->model, &g->price) != 0)
      continue;
    if (g->gpu_i_id[0]) { /* an instance whose parent is not listed: its share of the card */
      double share = mig_share(g->gpu_i_profile);
      if (!isfinite(share)) {
        memset(&g->price, 0, sizeof(g->price));
        continue;
      }
      g->price.per_gpu_hour *= share;
    }
    g->cost_window = g->hours_span * g->price.per_gpu_hour;
    g->idle_cost_window = (g->valid & RS_HAS_IDLE) ? g->idle_hours * g->price.per_gpu_hour : 0;
    g->valid |= RS_HAS_COST;
  }
  for (size_t i = 0; i < r->n_nodes; i++) {
    struct rs_node *n = &r->nodes[i];
    n->valid &= ~(unsigned)RS_HAS_COST;
    memset(&n->price, 0, sizeof(n->price));
    n->cost_window = n->idle_cost_window = 0;
    bool all = n->n_gpus > 0;
    for (size_t j = 0; j < n->n_gpus; j++) {
      const struct rs_gpu *g = &r->gpus[n->gpus[j]];
      if (g->mig_has_parent)
        continue;
      if (!(g->valid & RS_HAS_COST)) {
        all = false;
        continue;
      }
      if (j == 0 || n->price.source == RS_PRICE_NONE)
        n->price = g->price;
      n->cost_window += g->cost_window;
      n->idle_cost_window += g->idle_cost_window;
    }
    if (all)
      n->valid |= RS_HAS_COST;
    else
      memset(&n->price, 0, sizeof(n->price));
  }
}

/* A recommendation's savings count towards the total once per subject: every idle node and
 * consolidation counts; a workload's MIG, time-slicing and cheaper-GPU options are alternatives,
 * so only the largest counts, and none when the workload is already moved by a consolidation or
 * sits on an idle node. A MIG or time-slicing option whose packing shares a card counts instead of
 * the alternatives: its card is freed only when all its slices move, so taking another option for
 * one of them would count a card that is not freed. A watched node saves nothing. */
static double total_savings(const struct rs_report *r) {
  double total = 0;
  double *best = calloc(r->n_workloads ? r->n_workloads : 1, sizeof(*best));
  bool *taken = calloc(r->n_workloads ? r->n_workloads : 1, sizeof(*taken));
  bool *shared = calloc(r->n_workloads ? r->n_workloads : 1, sizeof(*shared));
  if (!best || !taken || !shared) {
    free(best);
    free(taken);
    free(shared);
    return NAN;
  }
  for (size_t i = 0; i < r->n_recs; i++) {
    const struct rs_rec *c = &r->recs[i];
    if (!(c->valid & RS_REC_HAS_SAVINGS))
      continue;
    if (c->kind == RS_REC_IDLE_NODE || c->kind == RS_REC_CONSOLIDATE) {
      total += c->savings_month;
      for (size_t j = 0; j < c->n_workloads; j++)
        if (c->workloads[j] < r->n_workloads)
          taken[c->workloads[j]] = true;
    }
  }
  for (size_t i = 0; i < r->n_recs; i++) {
    const struct rs_rec *c = &r->recs[i];
    if (!(c->valid & RS_REC_HAS_SAVINGS) || c->kind == RS_REC_IDLE_NODE ||
        c->kind == RS_REC_CONSOLIDATE || c->kind == RS_REC_WATCH_NODE ||
        c->workload_idx >= r->n_workloads || shared[c->workload_idx])
      continue;
    if (c->pack_shared) {
      /* its card's savings need every workload on it to move: the packing counts as a whole */
      best[c->workload_idx] = c->savings_month;
      shared[c->workload_idx] = true;
    } else if (c->savings_month > best[c->workload_idx]) {
      best[c->workload_idx] = c->savings_month;
    }
  }
  for (size_t w = 0; w < r->n_workloads; w++)
    if (!taken[w])
      total += best[w];
  free(best);
  free(taken);
  free(shared);
  return total;
}

void rs_cost_summarize(struct rs_report *r) {
  struct rs_summary *s = &r->summary;
  memset(s, 0, sizeof(*s));
  s->n_nodes = r->n_nodes;
  s->n_workloads = r->n_workloads;
  s->n_recs = r->n_recs;
  size_t priced = 0;
  for (size_t i = 0; i < r->n_gpus; i++) {
    const struct rs_gpu *g = &r->gpus[i];
    if (g->mig_has_parent)
      continue; /* a MIG instance of a listed card: the card counts once, as its parent */
    s->n_gpus++;
    s->gpu_hours_paid += g->hours_span;
    s->gpu_hours_observed += g->hours_observed;
    if (g->valid & RS_HAS_USED_HOURS)
      s->gpu_hours_used += g->used_gpu_hours;
    if (g->valid & RS_HAS_IDLE)
      s->gpu_hours_idle += g->idle_hours;
    if (g->valid & RS_HAS_COST) {
      priced++;
      s->cost_window += g->cost_window;
      s->idle_cost_window += g->idle_cost_window;
    } else {
      s->n_gpus_unpriced++;
    }
  }
  double window_h = (double)(r->end_ms - r->start_ms) / 3600000.0;
  if (priced) {
    s->valid |= RS_SUM_HAS_COST;
    if (window_h > 0) {
      s->cost_month = s->cost_window / window_h * RS_HOURS_PER_MONTH;
      s->idle_cost_month = s->idle_cost_window / window_h * RS_HOURS_PER_MONTH;
    }
  }
  bool any_savings = false;
  for (size_t i = 0; i < r->n_recs; i++) {
    const struct rs_rec *c = &r->recs[i];
    if ((unsigned)c->kind >= RS_REC_KIND_COUNT)
      continue;
    s->recs_by_kind[c->kind]++;
    if (c->valid & RS_REC_HAS_SAVINGS) {
      s->savings_month_by_kind[c->kind] += c->savings_month;
      any_savings = true;
    }
  }
  if (priced || any_savings) {
    double t = total_savings(r);
    if (isfinite(t)) {
      s->savings_month = t;
      s->valid |= RS_SUM_HAS_SAVINGS;
    }
  }
}
