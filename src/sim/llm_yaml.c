/* The `engine:` block of a model file. */
#include "sim/llm_yaml.h"

#include <stdlib.h>
#include <string.h>

#include "core/err.h"

#define E err, errlen

struct llm_params llm_params_default(void) {
  struct llm_params m = {true,
                         10,
                         0.01,
                         0.01,
                         LLM_DEFAULT_MAX_SEQS,
                         LLM_DEFAULT_BUDGET,
                         1e7,
                         1000,
                         200,
                         LLM_DEFAULT_SPREAD};
  return m;
}

int llm_params_parse(struct sim_yaml *y, yaml_node_t *v, struct llm_params *out, int *kv_given,
                     char *err, size_t errlen) {
  static const char *const keys[] = {"stepBaseMs",  "stepPerSequenceMs",   "stepPerPrefillTokenMs",
                                     "maxNumSeqs",  "maxNumBatchedTokens", "kvCacheTokens",
                                     "inputTokens", "outputTokens",        "lengthSpread",
                                     NULL};
  static const struct {
    const char *key;
    double min, max;
    bool need;
  } rows[] = {
      {"stepBaseMs", 0.001, 1e6, true},        {"stepPerSequenceMs", 0, 1e4, true},
      {"stepPerPrefillTokenMs", 0, 1e4, true}, {"maxNumSeqs", 1, 1e6, false},
      {"maxNumBatchedTokens", 1, 1e8, false},  {"kvCacheTokens", 1, 1e12, false},
      {"inputTokens", 1, 1e7, false},          {"outputTokens", 1, 1e7, false},
      {"lengthSpread", 0, 3, false},
  };
  struct llm_params m = llm_params_default();
  double *dst[] = {&m.base_ms,   &m.seq_ms,  &m.tok_ms,   &m.max_seqs, &m.budget,
                   &m.kv_tokens, &m.in_mean, &m.out_mean, &m.spread};
  *kv_given = 0;
  if (v->type != YAML_MAPPING_NODE)
    return sim_yaml_fail(y, v, "engine", E,
                         "must be a mapping of stepBaseMs, stepPerSequenceMs, "
                         "stepPerPrefillTokenMs and the batch limits");
  int rc = sim_yaml_known(y, v, "engine", keys, E);
  for (size_t i = 0; !rc && i < sizeof rows / sizeof rows[0]; i++) {
    yaml_node_t *n = sim_yaml_get(y, v, rows[i].key);
    char key[64];
    snprintf(key, sizeof key, "engine.%s", rows[i].key);
    if (!n && rows[i].need)
      rc = sim_yaml_fail(y, v, key, E,
                         "missing (the step costs come from `gpuscale simulate --calibrate` on "
                         "your `vllm bench serve` results)");
    else if (n)
      rc = sim_yaml_num(y, n, key, rows[i].min, rows[i].max, dst[i], E);
    if (!rc && n && i == 5)
      *kv_given = 1;
  }
  if (rc)
    return rc;
  if (m.budget < m.max_seqs) {
    yaml_node_t *n = sim_yaml_get(y, v, "maxNumBatchedTokens");
    return sim_yaml_fail(y, n ? n : v, "engine.maxNumBatchedTokens", E,
                         "%g: must be at least maxNumSeqs (%g), as vLLM requires", m.budget,
                         m.max_seqs);
  }
  *out = m;
  return 0;
}

void llm_params_write(FILE *f, const struct llm_params *m) {
  fprintf(f,
          "engine:\n"
          "  stepBaseMs: %.4g              # a step's fixed cost\n"
          "  stepPerSequenceMs: %.4g       # added per decoding sequence in the step\n"
          "  stepPerPrefillTokenMs: %.4g   # added per prompt token prefilled in the step\n"
          "  maxNumSeqs: %.0f              # vLLM --max-num-seqs\n"
          "  maxNumBatchedTokens: %.0f     # vLLM --max-num-batched-tokens\n"
          "  kvCacheTokens: %.0f           # the \"GPU KV cache size: N tokens\" vLLM logs\n"
          "  inputTokens: %.0f             # lengths when a trace gives rates only\n"
          "  outputTokens: %.0f\n"
          "  lengthSpread: %.2g            # sigma of the log-normal lengths drawn for rates\n",
          m->base_ms, m->seq_ms, m->tok_ms, m->max_seqs, m->budget, m->kv_tokens, m->in_mean,
          m->out_mean, m->spread);
}

struct llm_slo llm_slo_default(void) {
  struct llm_slo o = {false, 0, 0, 99, 600};
  return o;
}

/* One SLO key's value: a duration in seconds for ttft, tpot and timeout, a percent for
 * attainment. 0 or GS_EINVAL. */
static int slo_value(const char *key, const char *val, struct llm_slo *o) {
  double v;
  if (!strcmp(key, "attainment")) {
    char *end;
    v = strtod(val, &end);
    if (end == val || *end || !(v > 0 && v <= 100))
      return GS_EINVAL;
    o->attainment = v;
    return 0;
  }
  if (sim_parse_duration(val, &v) || !(v > 0) || v > 86400)
    return GS_EINVAL;
  if (!strcmp(key, "ttft"))
    o->ttft_s = v;
  else if (!strcmp(key, "tpot"))
    o->tpot_s = v;
  else if (!strcmp(key, "timeout"))
    o->timeout_s = v;
  else
    return GS_ENOTFOUND;
  return 0;
}

#define SLO_ALLOWED                                                                                \
  "ttft and tpot (durations such as 2s or 100ms), attainment (percent of requests, 0 < p <= 100) " \
  "and timeout (a duration)"

int llm_slo_parse_yaml(struct sim_yaml *y, yaml_node_t *v, struct llm_slo *out, char *err,
                       size_t errlen) {
  static const char *const keys[] = {"ttft", "tpot", "attainment", "timeout", NULL};
  if (v->type != YAML_MAPPING_NODE)
    return sim_yaml_fail(y, v, "slo", E, "must be a mapping of " SLO_ALLOWED);
  int rc = sim_yaml_known(y, v, "slo", keys, E);
  for (size_t i = 0; !rc && keys[i]; i++) {
    yaml_node_t *n = sim_yaml_get(y, v, keys[i]);
    const char *val = n ? sim_yaml_str(n) : NULL;
    if (!n)
      continue;
    if (!val || slo_value(keys[i], val, out))
      rc = sim_yaml_fail(y, n, keys[i], E, "%s: not allowed (" SLO_ALLOWED ")",
                         val ? val : "(not a scalar)");
  }
  if (!rc)
    out->set = out->ttft_s > 0 || out->tpot_s > 0;
  return rc;
}

int llm_slo_parse_flag(const char *s, struct llm_slo *out, char *err, size_t errlen) {
  struct llm_slo o = *out;
  char buf[256];
  if (strlen(s) >= sizeof buf) {
    snprintf(err, errlen, "--slo: too long");
    return GS_EINVAL;
  }
  snprintf(buf, sizeof buf, "%s", s);
  char *save = NULL;
  for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(kv, '=');
    if (!eq) {
      snprintf(err, errlen, "--slo: \"%s\": expected key=value (%s)", kv, SLO_ALLOWED);
      return GS_EINVAL;
    }
    *eq = '\0';
    int rc = slo_value(kv, eq + 1, &o);
    if (rc) {
      snprintf(err, errlen, "--slo: %s=%s: %s (%s)", kv, eq + 1,
               rc == GS_ENOTFOUND ? "unknown key" : "not allowed", SLO_ALLOWED);
      return GS_EINVAL;
    }
  }
  if (!(o.ttft_s > 0) && !(o.tpot_s > 0)) {
    snprintf(err, errlen, "--slo: %s: give ttft, tpot or both", s);
    return GS_EINVAL;
  }
  o.set = true;
  *out = o;
  return 0;
}
