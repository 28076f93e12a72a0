/* The `engine:` block of a model file. */
#include "sim/llm_yaml.h"

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
