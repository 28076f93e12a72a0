/* Built-in scaling profiles and user profiles loaded from a YAML file. */
#include "core/profile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

#include "core/err.h"
#include "core/trigger.h"

#define PROFILE_FILE_MAX (256 * 1024)
#define PROFILE_MAX 256

/* The reference scaler's (pmady/keda-gpu-scaler pkg/profiles) GPU-metric profiles, with its
 * values. It has no per-profile aggregation: every profile aggregates with max unless the
 * trigger says otherwise, and so do these (training included). */
#define GPU_PROFILE(name, metric, target, act)                                                     \
  { name, metric, target, act, AGG_MAX, false, 0 }
/* Engine profiles read one engine signal per pod and sum over pods: the HPA's Pods-metric
 * arithmetic (docs/engines.md). The reference scaler's three keep its target and activation. */
#define ENGINE_PROFILE(name, sig, target, act)                                                     \
  { name, GF_GPU_UTIL, target, act, AGG_SUM, true, sig }
static const struct profile builtin[] = {
    GPU_PROFILE("vllm-inference", GF_MEM_USED_PCT, 80, 5),
    GPU_PROFILE("triton-inference", GF_GPU_UTIL, 75, 10),
    GPU_PROFILE("training", GF_GPU_UTIL, 90, 0),
    GPU_PROFILE("batch", GF_MEM_USED_PCT, 70, 1),
    GPU_PROFILE("ollama", GF_MEM_USED_PCT, 70, 3),
    GPU_PROFILE("tgi-inference", GF_MEM_USED_PCT, 75, 5),
    GPU_PROFILE("distributed-training", GF_NVLINK_TX_MBPS, 50000, 5000),
    ENGINE_PROFILE("vllm-queue-depth", ES_VLLM_QUEUE_DEPTH, 5, 1),
    ENGINE_PROFILE("triton-queue-wait", ES_TRITON_QUEUE_WAIT_MS, 50, 5),
    ENGINE_PROFILE("triton-request-rate", ES_TRITON_REQUEST_RATE, 50, 1),
    /* ours, argued in docs/profiles.md */
    ENGINE_PROFILE("vllm-kv-cache", ES_VLLM_KV_CACHE, 75, 5),
    ENGINE_PROFILE("tgi-queue-size", ES_TGI_QUEUE, 5, 1),
    ENGINE_PROFILE("sglang-queue-depth", ES_SGLANG_QUEUE, 5, 1),
    /* requests in flight over maxNumSeqs, %: proportional to load (docs/engines.md); 100: one
     * replica per maxNumSeqs requests in flight (docs/simulate.md "Real traces") */
    ENGINE_PROFILE("vllm-in-flight", ES_VLLM_IN_FLIGHT, 100, 0),
    ENGINE_PROFILE("tgi-in-flight", ES_TGI_IN_FLIGHT, 100, 0),
    ENGINE_PROFILE("sglang-in-flight", ES_SGLANG_IN_FLIGHT, 100, 0),
};

int profile_set_init(struct profile_set *ps) {
  size_t n = sizeof builtin / sizeof builtin[0];
  ps->endpoint_check = NULL;
  ps->lock = NULL;
  ps->items = malloc(sizeof builtin);
  if (!ps->items)
    return GS_ENOMEM;
  memcpy(ps->items, builtin, sizeof builtin);
  ps->n = n;
  return 0;
}

void profile_set_free(struct profile_set *ps) {
  if (!ps)
    return;
  free(ps->items);
  ps->items = NULL;
  ps->n = 0;
}

const struct profile *profile_find(const struct profile_set *ps, const char *name) {
  for (size_t i = 0; i < ps->n; i++)
    if (strcmp(ps->items[i].name, name) == 0)
      return &ps->items[i];
  return NULL;
}

void profile_names(const struct profile_set *ps, char *buf, size_t len) {
  size_t off = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < ps->n && off < len; i++) {
    int w = snprintf(buf + off, len - off, "%s%s", i ? ", " : "", ps->items[i].name);
    if (w < 0)
      break;
    off += (size_t)w;
  }
}

/* Parses a whole string as a finite double. */
static int parse_number(const char *s, double *out) {
  if (s[strspn(s, " \t0123456789.+-eE")] != '\0') /* no hex, inf or nan spellings */
    return GS_EINVAL;
  char *end;
  if (!*s)
    return GS_EINVAL;
  double v = strtod(s, &end);
  if (*end || !isfinite(v))
    return GS_EINVAL;
  *out = v;
  return 0;
}

static int fail(char *err, size_t errlen, const char *path, const yaml_node_t *n, const char *msg,
                const char *key) {
  snprintf(err, errlen, "%s:%lu: %s%s%s", path, n ? (unsigned long)n->start_mark.line + 1 : 0UL,
           key ? key : "", key ? ": " : "", msg);
  return GS_EINVAL;
}

static int parse_profile(yaml_document_t *doc, const char *path, const char *name,
                         yaml_node_t *body, struct profile *p, char *err, size_t errlen) {
  if (body->type != YAML_MAPPING_NODE)
    return fail(err, errlen, path, body,
                "must be a mapping of metric, target, activation, aggregation", name);
  memset(p, 0, sizeof *p);
  if (strlen(name) >= sizeof p->name || !*name)
    return fail(err, errlen, path, body, "profile names must be 1..63 characters", name);
  snprintf(p->name, sizeof p->name, "%s", name);
  p->agg = AGG_MAX;
  bool have_metric = false, have_target = false, have_agg = false;
  for (yaml_node_pair_t *pr = body->data.mapping.pairs.start; pr < body->data.mapping.pairs.top;
       pr++) {
    yaml_node_t *k = yaml_document_get_node(doc, pr->key);
    yaml_node_t *v = yaml_document_get_node(doc, pr->value);
    if (!k || !v || k->type != YAML_SCALAR_NODE || v->type != YAML_SCALAR_NODE)
      return fail(err, errlen, path, k ? k : body, "keys and values must be plain scalars", name);
    const char *key = (const char *)k->data.scalar.value;
    const char *val = (const char *)v->data.scalar.value;
    char msg[512];
    if (strcmp(key, "metric") == 0 && engine_signal_parse(val, &p->esignal) == 0) {
      p->engine = true; /* an engine signal, read per pod (docs/engines.md) */
      if (!have_agg)
        p->agg = AGG_SUM;
      have_metric = true;
    } else if (strcmp(key, "metric") == 0) {
      p->engine = false;
      if (gpu_field_parse(val, &p->metric) || !trigger_scaler_metric(p->metric)) {
        snprintf(msg, sizeof msg,
                 "\"%.40s\" is not a scaler metric; allowed: " TRIGGER_SCALER_METRICS
                 ", or an engine signal (vllm_queue_depth, vllm_kv_cache_usage, ...: "
                 "docs/engines.md)",
                 val);
        return fail(err, errlen, path, v, msg, "metric");
      }
      have_metric = true;
    } else if (strcmp(key, "target") == 0) {
      if (parse_number(val, &p->target) || p->target <= 0) {
        snprintf(msg, sizeof msg, "\"%s\" must be a finite number > 0", val);
        return fail(err, errlen, path, v, msg, "target");
      }
      have_target = true;
    } else if (strcmp(key, "activation") == 0) {
      if (parse_number(val, &p->activation) || p->activation < 0) {
        snprintf(msg, sizeof msg, "\"%s\" must be a finite number >= 0", val);
        return fail(err, errlen, path, v, msg, "activation");
      }
    } else if (strcmp(key, "aggregation") == 0) {
      have_agg = true;
      if (aggregation_parse(val, &p->agg)) {
        snprintf(msg, sizeof msg, "\"%s\" is not allowed; allowed: %s", val, aggregation_allowed());
        return fail(err, errlen, path, v, msg, "aggregation");
      }
    } else {
      snprintf(msg, sizeof msg,
               "unknown key in profile %s; allowed: metric, target, activation, aggregation", name);
      return fail(err, errlen, path, k, msg, key);
    }
  }
  if (!have_metric || !have_target)
    return fail(err, errlen, path, body, "a profile needs both metric and target", name);
  return 0;
}

static int load_doc(struct profile_set *ps, yaml_document_t *doc, const char *path, char *err,
                    size_t errlen) {
  yaml_node_t *root = yaml_document_get_root_node(doc);
  if (!root || root->type != YAML_MAPPING_NODE)
    return fail(err, errlen, path, root, "the file must be a mapping with a 'profiles' key", NULL);
  yaml_node_t *profiles = NULL;
  for (yaml_node_pair_t *pr = root->data.mapping.pairs.start; pr < root->data.mapping.pairs.top;
       pr++) {
    yaml_node_t *k = yaml_document_get_node(doc, pr->key);
    if (k && k->type == YAML_SCALAR_NODE &&
        strcmp((const char *)k->data.scalar.value, "profiles") == 0)
      profiles = yaml_document_get_node(doc, pr->value);
    else
      return fail(err, errlen, path, k, "unknown top-level key; allowed: profiles",
                  k && k->type == YAML_SCALAR_NODE ? (const char *)k->data.scalar.value : "?");
  }
  if (!profiles || profiles->type != YAML_MAPPING_NODE)
    return fail(err, errlen, path, profiles ? profiles : root,
                "must be a mapping of profile name to settings", "profiles");

  struct profile_set next = {0};
  size_t extra = (size_t)(profiles->data.mapping.pairs.top - profiles->data.mapping.pairs.start);
  if (ps->n + extra > PROFILE_MAX)
    return fail(err, errlen, path, profiles, "too many profiles (at most 256)", "profiles");
  next.items = malloc((ps->n + extra) * sizeof *next.items);
  if (!next.items)
    return GS_ENOMEM;
  memcpy(next.items, ps->items, ps->n * sizeof *ps->items);
  next.n = ps->n;
  for (yaml_node_pair_t *pr = profiles->data.mapping.pairs.start;
       pr < profiles->data.mapping.pairs.top; pr++) {
    yaml_node_t *k = yaml_document_get_node(doc, pr->key);
    yaml_node_t *v = yaml_document_get_node(doc, pr->value);
    if (!k || !v || k->type != YAML_SCALAR_NODE) {
      free(next.items);
      return fail(err, errlen, path, k ? k : profiles, "profile names must be scalars", "profiles");
    }
    struct profile p;
    int rc = parse_profile(doc, path, (const char *)k->data.scalar.value, v, &p, err, errlen);
    if (rc) {
      free(next.items);
      return rc;
    }
    struct profile *slot = NULL;
    for (size_t i = 0; i < next.n; i++)
      if (strcmp(next.items[i].name, p.name) == 0)
        slot = &next.items[i];
    if (!slot)
      slot = &next.items[next.n++];
    *slot = p;
  }
  next.endpoint_check = ps->endpoint_check;
  free(ps->items);
  *ps = next;
  return 0;
}

int profile_set_load(struct profile_set *ps, const char *path, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "%s: cannot open: %m", path);
    return GS_EIO;
  }
  struct stat st;
  if (fstat(fileno(f), &st) == 0 && st.st_size > PROFILE_FILE_MAX) {
    fclose(f);
    snprintf(err, errlen, "%s: file is larger than %d bytes", path, PROFILE_FILE_MAX);
    return GS_ETOOBIG;
  }
  yaml_parser_t parser;
  yaml_document_t doc;
  if (!yaml_parser_initialize(&parser)) {
    fclose(f);
    snprintf(err, errlen, "%s: out of memory", path);
    return GS_ENOMEM;
  }
  yaml_parser_set_input_file(&parser, f);
  int rc;
  if (!yaml_parser_load(&parser, &doc)) {
    /* libyaml's loader fails some allocations with no error recorded (YAML_NO_ERROR) */
    if (parser.error == YAML_MEMORY_ERROR || parser.error == YAML_NO_ERROR) {
      snprintf(err, errlen, "%s: out of memory", path);
      rc = GS_ENOMEM;
    } else {
      snprintf(err, errlen, "%s:%lu: %s", path, (unsigned long)parser.problem_mark.line + 1,
               parser.problem ? parser.problem : "YAML syntax error");
      rc = GS_EPARSE;
    }
  } else {
    rc = load_doc(ps, &doc, path, err, errlen);
    yaml_document_delete(&doc);
  }
  yaml_parser_delete(&parser);
  fclose(f);
  return rc;
}
