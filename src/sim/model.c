/* The workload model file: capacity, placement, start-up, drain and signals as data. */
#include "sim/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "sim/llm_yaml.h"
#include "sim/yamlx.h"

#define E err, errlen

const struct sim_signal *sim_model_signal(const struct sim_model *m, const char *name) {
  for (size_t i = 0; i < m->nsig; i++)
    if (!strcmp(m->sig[i].name, name))
      return &m->sig[i];
  return NULL;
}

const struct sim_signal *sim_model_field(const struct sim_model *m, enum gpu_field f) {
  for (size_t i = 0; i < m->nsig; i++)
    if (m->sig[i].gpu && m->sig[i].field == f)
      return &m->sig[i];
  return NULL;
}

const struct sim_signal *sim_model_engine(const struct sim_model *m, enum engine_signal es) {
  for (size_t i = 0; i < m->nsig; i++)
    if (m->sig[i].engine && m->sig[i].esig == es)
      return &m->sig[i];
  return NULL;
}

double sim_signal_at(const struct sim_signal *s, double rho, double waiting) {
  struct sim_load l = {rho, waiting, 0, 0, 0};
  return sim_signal_value(s, &l);
}

double sim_signal_value(const struct sim_signal *s, const struct sim_load *l) {
  double rho = l->rho, waiting = l->waiting;
  switch (s->kind) {
  case SIM_SIG_BATCH: {
    double v = s->batch == SIM_BATCH_RUNNING   ? l->running
               : s->batch == SIM_BATCH_WAITING ? l->waiting
               : s->batch == SIM_BATCH_KV      ? l->kv_pct
                                               : l->inflight_pct;
    return v * s->scale;
  }
  case SIM_SIG_FLAT: return s->flat;
  case SIM_SIG_OBSERVED: return NAN; /* per pod from its requests (sim/serve.h), not from load */
  case SIM_SIG_QUEUE: {
    /* M/M/1 mean number waiting, rho^2 / (1 - rho), below saturation; the backlog above */
    double mm1 = rho < 0.999 ? rho * rho / (1 - rho) : 999 * rho;
    double q = waiting + (rho < 1 ? mm1 : 0);
    return q;
  }
  default: {
    double v = s->idle + (s->full - s->idle) * rho;
    return v > s->max ? s->max : v;
  }
  }
}

double sim_model_mean_start(const struct sim_model *m) {
  return m->start == SIM_START_UNIFORM ? (m->start_s + m->start_max_s) / 2 : m->start_s;
}

bool sim_model_outage(const struct sim_model *m, double t) {
  for (size_t i = 0; i < m->noutages; i++)
    if (t >= m->outage_from[i] && t < m->outage_to[i])
      return true;
  return false;
}

static int parse_signal(struct sim_yaml *y, const char *name, yaml_node_t *v, struct sim_signal *s,
                        char *err, size_t errlen) {
  static const char *const keys[] = {"idle",  "full",  "max",      "flat", "queue",
                                     "batch", "scale", "observed", NULL};
  memset(s, 0, sizeof *s);
  snprintf(s->name, sizeof s->name, "%s", name);
  enum gpu_field f;
  if (!strcmp(name, "cpu")) {
    s->cpu = true;
  } else if (gpu_field_parse(name, &f) == 0) {
    s->gpu = true;
    s->field = f;
  } else if (engine_signal_parse(name, &s->esig) == 0) {
    s->engine = true;
  }
  char key[160];
  snprintf(key, sizeof key, "signals.%s", name);
  int rc = sim_yaml_known(y, v, key, keys, E);
  if (rc)
    return rc;
  yaml_node_t *n;
  if ((n = sim_yaml_get(y, v, "flat"))) {
    s->kind = SIM_SIG_FLAT;
    return sim_yaml_num(y, n, key, 0, 1e12, &s->flat, E);
  }
  if ((n = sim_yaml_get(y, v, "batch"))) {
    int idx = 0;
    s->kind = SIM_SIG_BATCH;
    s->scale = 1;
    if ((rc = sim_yaml_enum(y, n, key, SIM_BATCH_OFS, &idx, E)))
      return rc;
    s->batch = (enum sim_batch_of)idx;
    if ((n = sim_yaml_get(y, v, "scale")))
      return sim_yaml_num(y, n, key, 1e-9, 1e9, &s->scale, E);
    return 0;
  }
  if ((n = sim_yaml_get(y, v, "observed"))) {
    const char *q = sim_yaml_str(n);
    bool ok =
        s->engine && (engine_signal_latency(s->esig) >= 0 || s->esig == ES_VLLM_WAITING_TOKENS ||
                      s->esig == ES_VLLM_PREFILL_RATE || s->esig == ES_SGLANG_WAITING_TOKENS ||
                      s->esig == ES_SGLANG_PREFILL_RATE);
    if (!q || strcmp(q, "true"))
      return sim_yaml_fail(y, n, key, E, "observed: \"%.20s\": must be true", q ? q : "");
    if (!ok)
      return sim_yaml_fail(y, n, key, E,
                           "observed: only an engine's latency histogram (vllm_ttft_seconds...) "
                           "or prompt tokens (vllm_waiting_prompt_tokens, "
                           "vllm_prefill_tokens_per_second...) is observed");
    s->kind = SIM_SIG_OBSERVED;
    return 0;
  }
  if ((n = sim_yaml_get(y, v, "queue"))) {
    const char *q = sim_yaml_str(n);
    if (!q || strcmp(q, "true"))
      return sim_yaml_fail(y, n, key, E, "queue: \"%.20s\": must be true", q ? q : "");
    s->kind = SIM_SIG_QUEUE;
    return 0;
  }
  s->kind = SIM_SIG_LINEAR;
  if ((n = sim_yaml_get(y, v, "idle")) && (rc = sim_yaml_num(y, n, key, 0, 1e12, &s->idle, E)))
    return rc;
  n = sim_yaml_get(y, v, "full");
  if (!n)
    return sim_yaml_fail(y, v, key, E, "needs full (value at full load), flat, or queue: true");
  if ((rc = sim_yaml_num(y, n, key, 0, 1e12, &s->full, E)))
    return rc;
  s->max = s->full;
  if ((n = sim_yaml_get(y, v, "max")) && (rc = sim_yaml_num(y, n, key, 0, 1e12, &s->max, E)))
    return rc;
  if (s->gpu &&
      (s->field == GF_GPU_UTIL || s->field == GF_MEM_UTIL || s->field == GF_MEM_USED_PCT) &&
      s->max > 100)
    s->max = 100; /* a percentage never reads above 100 */
  return 0;
}

static int parse_signals(struct sim_yaml *y, yaml_node_t *v, struct sim_model *m, char *err,
                         size_t errlen) {
  if (!v)
    return 0;
  if (v->type != YAML_MAPPING_NODE)
    return sim_yaml_fail(y, v, "signals", E, "must be a mapping of signal name to its shape");
  for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
    yaml_node_t *kn = yaml_document_get_node(&y->doc, p->key);
    const char *k = sim_yaml_str(kn);
    if (!k || !*k || strlen(k) >= SIM_SIGNAL_NAME)
      return sim_yaml_fail(y, kn, "signals", E, "a signal name must be 1..%d characters",
                           SIM_SIGNAL_NAME - 1);
    if (m->nsig == SIM_MAX_SIGNALS)
      return sim_yaml_fail(y, kn, "signals", E, "more than %d signals", SIM_MAX_SIGNALS);
    if (sim_model_signal(m, k))
      return sim_yaml_fail(y, kn, "signals", E, "\"%s\" given twice", k);
    int rc = parse_signal(y, k, yaml_document_get_node(&y->doc, p->value), &m->sig[m->nsig], E);
    if (rc)
      return rc;
    const struct sim_signal *sg = &m->sig[m->nsig];
    enum engine_signal run, wait;
    if (sg->engine && engine_signal_derived(sg->esig, &run, &wait))
      return sim_yaml_fail(y, kn, "signals", E,
                           "\"%s\" is derived by the policy from %s and %s (and the trigger's "
                           "maxNumSeqs): give those two signals",
                           k, engine_signal_name(run), engine_signal_name(wait));
    if (sg->engine) { /* one engine per workload: its pods serve one engine's metrics */
      enum engine_kind k2 = engine_signal_kind(sg->esig);
      if (m->engine != ENGINE_UNKNOWN && m->engine != k2)
        return sim_yaml_fail(y, kn, "signals", E,
                             "\"%s\" is a %s metric, and the other engine signals are %s: a "
                             "workload's pods run one engine",
                             k, engine_kind_name(k2), engine_kind_name(m->engine));
      m->engine = k2;
    }
    m->nsig++;
  }
  return 0;
}

static int parse_batching(struct sim_yaml *y, yaml_node_t *v, struct sim_model *m, char *err,
                          size_t errlen) {
  static const char *const keys[] = {"maxNumSeqs",
                                     "kvCacheTokens",
                                     "prefillTokensPerSecond",
                                     "decodeTokensPerSecond",
                                     "streamTokensPerSecond",
                                     "inputTokens",
                                     "outputTokens",
                                     NULL};
  static const char *const need[] = {"maxNumSeqs", "kvCacheTokens", "prefillTokensPerSecond",
                                     "decodeTokensPerSecond"};
  struct sim_batching *b = &m->batching;
  if (!v)
    return 0;
  int rc = sim_yaml_known(y, v, "batching", keys, E);
  if (rc)
    return rc;
  double *dst[] = {&b->max_num_seqs, &b->kv_tokens, &b->prefill_tps, &b->decode_tps};
  for (size_t i = 0; i < 4; i++) {
    yaml_node_t *n = sim_yaml_get(y, v, need[i]);
    char key[64];
    snprintf(key, sizeof key, "batching.%s", need[i]);
    if (!n)
      return sim_yaml_fail(y, v, key, E,
                           "missing (a continuous-batching server needs "
                           "maxNumSeqs, kvCacheTokens, prefillTokensPerSecond and "
                           "decodeTokensPerSecond)");
    if ((rc = sim_yaml_num(y, n, key, 1, 1e12, dst[i], E)))
      return rc;
  }
  b->stream_tps = b->decode_tps / b->max_num_seqs; /* a full batch is the throughput's limit */
  b->input_tokens = 1000;
  b->output_tokens = 200;
  yaml_node_t *n;
  if ((n = sim_yaml_get(y, v, "streamTokensPerSecond")) &&
      (rc = sim_yaml_num(y, n, "batching.streamTokensPerSecond", 0.001, 1e9, &b->stream_tps, E)))
    return rc;
  if ((n = sim_yaml_get(y, v, "inputTokens")) &&
      (rc = sim_yaml_num(y, n, "batching.inputTokens", 1, 1e9, &b->input_tokens, E)))
    return rc;
  if ((n = sim_yaml_get(y, v, "outputTokens")) &&
      (rc = sim_yaml_num(y, n, "batching.outputTokens", 1, 1e9, &b->output_tokens, E)))
    return rc;
  b->set = true;
  return 0;
}

static int parse_startup(struct sim_yaml *y, yaml_node_t *v, struct sim_model *m, char *err,
                         size_t errlen) {
  static const char *const keys[] = {"min", "max", "mean", "sd", NULL};
  if (!v)
    return 0;
  if (v->type == YAML_SCALAR_NODE) {
    m->start = SIM_START_FIXED;
    return sim_yaml_duration(y, v, "startup", 0, 86400, &m->start_s, E);
  }
  int rc = sim_yaml_known(y, v, "startup", keys, E);
  if (rc)
    return rc;
  yaml_node_t *mn = sim_yaml_get(y, v, "min"), *mx = sim_yaml_get(y, v, "max");
  yaml_node_t *mean = sim_yaml_get(y, v, "mean"), *sd = sim_yaml_get(y, v, "sd");
  if (mn && mx) {
    m->start = SIM_START_UNIFORM;
    if ((rc = sim_yaml_duration(y, mn, "startup.min", 0, 86400, &m->start_s, E)) ||
        (rc = sim_yaml_duration(y, mx, "startup.max", m->start_s, 86400, &m->start_max_s, E)))
      return rc;
    return 0;
  }
  if (mean) {
    m->start = sd ? SIM_START_NORMAL : SIM_START_FIXED;
    if ((rc = sim_yaml_duration(y, mean, "startup.mean", 0, 86400, &m->start_s, E)))
      return rc;
    return sd ? sim_yaml_duration(y, sd, "startup.sd", 0, 86400, &m->start_sd_s, E) : 0;
  }
  return sim_yaml_fail(y, v, "startup", E,
                       "give a duration, {min, max} (uniform) or {mean, sd} (normal)");
}

static int parse_outages(struct sim_yaml *y, yaml_node_t *v, struct sim_model *m, char *err,
                         size_t errlen) {
  static const char *const keys[] = {"from", "to", NULL};
  size_t n = sim_yaml_len(v);
  if (v && v->type != YAML_SEQUENCE_NODE)
    return sim_yaml_fail(y, v, "outages", E, "must be a list of {from, to}");
  if (n > 8)
    return sim_yaml_fail(y, v, "outages", E, "at most 8 outages");
  for (size_t i = 0; i < n; i++) {
    yaml_node_t *o = sim_yaml_item(y, v, i);
    int rc = sim_yaml_known(y, o, "outages[]", keys, E);
    yaml_node_t *f = sim_yaml_get(y, o, "from"), *t = sim_yaml_get(y, o, "to");
    if (rc)
      return rc;
    if (!f || !t)
      return sim_yaml_fail(y, o, "outages[]", E, "needs from and to (durations)");
    if ((rc = sim_yaml_duration(y, f, "outages[].from", 0, 1e8, &m->outage_from[i], E)) ||
        (rc = sim_yaml_duration(y, t, "outages[].to", m->outage_from[i], 1e8, &m->outage_to[i], E)))
      return rc;
  }
  m->noutages = n;
  return 0;
}

static int parse_strings(struct sim_yaml *y, yaml_node_t *root, struct sim_model *m, char *err,
                         size_t errlen) {
  yaml_node_t *n;
  int idx = 0, rc;
  if ((n = sim_yaml_get(y, root, "name"))) {
    const char *s = sim_yaml_str(n);
    if (!s || strlen(s) >= sizeof m->name)
      return sim_yaml_fail(y, n, "name", E, "must be a string of at most %zu characters",
                           sizeof m->name - 1);
    snprintf(m->name, sizeof m->name, "%s", s);
  }
  if ((n = sim_yaml_get(y, root, "gpuModel"))) {
    const char *s = sim_yaml_str(n);
    if (!s || strlen(s) >= sizeof m->gpu_model)
      return sim_yaml_fail(y, n, "gpuModel", E, "must be a modelName string");
    snprintf(m->gpu_model, sizeof m->gpu_model, "%s", s);
  }
  if ((n = sim_yaml_get(y, root, "placement"))) {
    if ((rc = sim_yaml_enum(y, n, "placement", "dedicated|timeslice", &idx, E)))
      return rc;
    m->placement = (enum sim_placement)idx;
  }
  if ((n = sim_yaml_get(y, root, "scheduling"))) {
    if ((rc = sim_yaml_enum(y, n, "scheduling", "pack|spread", &idx, E)))
      return rc;
    m->scheduling = (enum sim_scheduling)idx;
  }
  if ((n = sim_yaml_get(y, root, "agentNode"))) {
    const char *v = sim_yaml_str(n);
    long l;
    if (v && !strcmp(v, "round-robin"))
      m->agent_round_robin = true;
    else if ((rc = sim_yaml_int(y, n, "agentNode", 0, 100000, &l, E)))
      return sim_yaml_fail(y, n, "agentNode", E,
                           "\"%.40s\": must be a node number (0, 1, ...) or round-robin",
                           v ? v : "");
    else
      m->agent_node = (int)l;
  }
  if ((n = sim_yaml_get(y, root, "sharedCounting"))) {
    if ((rc = sim_yaml_enum(y, n, "sharedCounting", "once|per-pod", &idx, E)))
      return rc;
    m->shared_per_pod = idx == 1;
  }
  return 0;
}

/* memory_used_mib from memory_used_percent and gpuMemoryMiB, unless the file gives it (for
 * triggers on DCGM_FI_DEV_FB_USED or memory_used_mib). */
static void derive_mib(struct sim_model *m) {
  const struct sim_signal *pct = sim_model_field(m, GF_MEM_USED_PCT);
  if (!pct || pct->kind == SIM_SIG_QUEUE || pct->kind == SIM_SIG_BATCH ||
      sim_model_field(m, GF_MEM_USED_MIB) || m->nsig == SIM_MAX_SIGNALS)
    return;
  struct sim_signal *s = &m->sig[m->nsig++];
  double k = m->gpu_memory_mib / 100.0;
  *s = *pct;
  snprintf(s->name, sizeof s->name, "%s", gpu_field_name(GF_MEM_USED_MIB));
  s->field = GF_MEM_USED_MIB;
  s->idle *= k;
  s->full *= k;
  s->max *= k;
  s->flat *= k;
}

int sim_model_parse(const char *text, size_t len, const char *file, struct sim_model *m, char *err,
                    size_t errlen) {
  static const char *const keys[] = {"name",
                                     "capacity",
                                     "gpusPerReplica",
                                     "gpusPerNode",
                                     "gpuModel",
                                     "gpuMemoryMiB",
                                     "placement",
                                     "slicesPerGpu",
                                     "maxGpus",
                                     "sharedCounting",
                                     "startup",
                                     "drain",
                                     "queuePerPod",
                                     "signals",
                                     "outages",
                                     "nodes",
                                     "scheduling",
                                     "agentNode",
                                     "requestSeconds",
                                     "batching",
                                     "engine",
                                     "routing",
                                     "slo",
                                     "engineInterval",
                                     NULL};
  memset(m, 0, sizeof *m);
  snprintf(m->name, sizeof m->name, "workload");
  snprintf(m->gpu_model, sizeof m->gpu_model, "NVIDIA H100 80GB HBM3");
  m->gpus_per_replica = 1;
  m->gpus_per_node = 8;
  m->gpu_memory_mib = 81559;
  m->slices_per_gpu = 4;
  m->start_s = 90;
  m->drain_s = 30;
  m->queue_per_pod = 256;
  struct sim_yaml y;
  int rc = sim_yaml_load(&y, text, len, file, E);
  yaml_node_t *root = rc ? NULL : sim_yaml_root(&y);
  if (!rc && root->type != YAML_MAPPING_NODE)
    rc = sim_yaml_fail(&y, root, "model", E, "must be a mapping");
  if (!rc)
    rc = sim_yaml_known(&y, root, "model", keys, E);
  yaml_node_t *n = NULL;
  long l;
  if (!rc)
    rc = parse_batching(&y, sim_yaml_get(&y, root, "batching"), m, E);
  if (!rc && (n = sim_yaml_get(&y, root, "engine"))) {
    int kv = 0;
    rc = llm_params_parse(&y, n, &m->llm, &kv, E);
    m->llm_kv_given = kv;
    if (!rc && m->batching.set)
      rc = sim_yaml_fail(&y, n, "engine", E,
                         "a model has one engine model: engine (step costs) or batching, not both");
  }
  m->slo = llm_slo_default();
  m->engine_interval_s = 5;
  if (!rc && (n = sim_yaml_get(&y, root, "engineInterval")))
    rc = sim_yaml_duration(&y, n, "engineInterval", 1, 300, &m->engine_interval_s, E);
  if (!rc && (n = sim_yaml_get(&y, root, "slo")))
    rc = llm_slo_parse_yaml(&y, n, &m->slo, E);
  if (!rc && (n = sim_yaml_get(&y, root, "routing"))) {
    int idx;
    if (!(rc = sim_yaml_enum(&y, n, "routing", LLM_ROUTES, &idx, E)))
      m->routing = (enum llm_route)idx;
    if (!rc && !m->llm.set)
      rc = sim_yaml_fail(&y, n, "routing", E,
                         "needs an engine block: the fluid models spread load evenly");
  }
  if (!rc && !(n = sim_yaml_get(&y, root, "capacity")) && !m->batching.set && !m->llm.set)
    rc = sim_yaml_fail(&y, root, "capacity", E,
                       "missing: the work per second one replica serves at full load (or a "
                       "batching block, which derives it)");
  if (!rc && n)
    rc = sim_yaml_num(&y, n, "capacity", 1e-6, 1e9, &m->capacity, E);
  m->capacity_derived = !rc && !n;
  if (!rc && !n)
    m->capacity = m->llm.set ? llm_capacity(&m->llm, m->llm.in_mean, m->llm.out_mean)
                             : sim_batch_capacity(&m->batching, m->batching.input_tokens,
                                                  m->batching.output_tokens);
  if (!rc && (n = sim_yaml_get(&y, root, "gpusPerReplica")) &&
      !(rc = sim_yaml_int(&y, n, "gpusPerReplica", 1, 64, &l, E)))
    m->gpus_per_replica = (int)l;
  if (!rc && (n = sim_yaml_get(&y, root, "gpusPerNode")) &&
      !(rc = sim_yaml_int(&y, n, "gpusPerNode", 1, 64, &l, E)))
    m->gpus_per_node = (int)l;
  if (!rc && (n = sim_yaml_get(&y, root, "slicesPerGpu")) &&
      !(rc = sim_yaml_int(&y, n, "slicesPerGpu", 1, 64, &l, E)))
    m->slices_per_gpu = (int)l;
  if (!rc && (n = sim_yaml_get(&y, root, "nodes")) &&
      !(rc = sim_yaml_int(&y, n, "nodes", 0, 10000, &l, E)))
    m->nodes = (int)l;
  if (!rc && (n = sim_yaml_get(&y, root, "requestSeconds")))
    rc = sim_yaml_duration(&y, n, "requestSeconds", 0.001, 3600, &m->request_s, E);
  if (!rc && (n = sim_yaml_get(&y, root, "maxGpus")) &&
      !(rc = sim_yaml_int(&y, n, "maxGpus", 0, 100000, &l, E)))
    m->max_gpus = (int)l;
  if (!rc && (n = sim_yaml_get(&y, root, "gpuMemoryMiB")))
    rc = sim_yaml_num(&y, n, "gpuMemoryMiB", 1, 1e7, &m->gpu_memory_mib, E);
  if (!rc && (n = sim_yaml_get(&y, root, "drain")))
    rc = sim_yaml_duration(&y, n, "drain", 0, 86400, &m->drain_s, E);
  if (!rc && (n = sim_yaml_get(&y, root, "queuePerPod")))
    rc = sim_yaml_num(&y, n, "queuePerPod", 0, 1e9, &m->queue_per_pod, E);
  if (!rc)
    rc = parse_strings(&y, root, m, E);
  if (!rc)
    rc = parse_startup(&y, sim_yaml_get(&y, root, "startup"), m, E);
  if (!rc)
    rc = parse_signals(&y, sim_yaml_get(&y, root, "signals"), m, E);
  if (!rc)
    rc = parse_outages(&y, sim_yaml_get(&y, root, "outages"), m, E);
  if (!rc)
    derive_mib(m);
  for (size_t i = 0; !rc && i < m->nsig; i++)
    if (m->sig[i].kind == SIM_SIG_OBSERVED && !m->llm.set)
      rc = sim_yaml_fail(&y, root, "signals", E,
                         "%s: observed: needs the model's engine block (the step-time engine "
                         "model observes each request)",
                         m->sig[i].name);
    else if (m->sig[i].kind == SIM_SIG_BATCH && !m->batching.set && !m->llm.set)
      rc = sim_yaml_fail(&y, root, "signals", E,
                         "%s: batch: needs the model's batching block (maxNumSeqs, "
                         "kvCacheTokens, ...)",
                         m->sig[i].name);
  if (!rc && m->scheduling == SIM_SCHED_SPREAD && m->nodes == 0)
    rc = sim_yaml_fail(&y, root, "scheduling", E,
                       "spread needs nodes (the cluster's GPU node count) to spread over");
  if (!rc && m->nodes > 0 && m->agent_node >= m->nodes)
    rc = sim_yaml_fail(&y, root, "agentNode", E, "%d: the cluster has nodes 0..%d", m->agent_node,
                       m->nodes - 1);
  if (!rc && m->nodes > 0 && m->gpus_per_replica > m->gpus_per_node)
    rc = sim_yaml_fail(&y, root, "gpusPerReplica", E, "%d: a pod fits on one node (gpusPerNode %d)",
                       m->gpus_per_replica, m->gpus_per_node);
  if (!rc && m->placement == SIM_PLACE_TIMESLICE && m->gpus_per_replica != 1)
    rc = sim_yaml_fail(&y, root, "gpusPerReplica", E,
                       "%d: time-sliced replicas take one slice of one GPU (use 1)",
                       m->gpus_per_replica);
  sim_yaml_free(&y);
  return rc;
}

int sim_model_load(const char *path, struct sim_model *out, char *err, size_t errlen) {
  char *text;
  size_t len;
  int rc = sim_read_file(path, SIM_INPUT_MAX, &text, &len, E);
  if (rc)
    return rc;
  rc = sim_model_parse(text, len, path, out, E);
  free(text);
  return rc;
}
