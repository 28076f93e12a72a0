/* The model file's `engine:` block (the step-time engine model) as YAML, read and written. */
#ifndef GS_SIM_LLM_YAML_H
#define GS_SIM_LLM_YAML_H

#include <stdio.h>

#include "sim/llm.h"
#include "sim/yamlx.h"

/* Parses an `engine:` mapping into *out (defaults for keys not given). Returns 0 or GS_EINVAL
 * with err naming file:line, engine.<key>, the value and what is allowed. *kv_given tells
 * whether kvCacheTokens was written (a calibration fits it otherwise). */
int llm_params_parse(struct sim_yaml *y, yaml_node_t *v, struct llm_params *out, int *kv_given,
                     char *err, size_t errlen);
/* The defaults: vLLM's batch limits, no KV limit to speak of, ShareGPT-like lengths. */
struct llm_params llm_params_default(void);
/* Parses an `slo:` mapping (ttft, tpot: durations; attainment: percent; timeout: a duration).
 * Returns 0 or GS_EINVAL naming file:line and slo.<key>. */
int llm_slo_parse_yaml(struct sim_yaml *y, yaml_node_t *v, struct llm_slo *out, char *err,
                       size_t errlen);
/* Parses --slo "ttft=2s,tpot=100ms[,attainment=99][,timeout=10m]" over *out (keys not given keep
 * their value). Returns 0 or GS_EINVAL naming the key and what is allowed. */
int llm_slo_parse_flag(const char *s, struct llm_slo *out, char *err, size_t errlen);
/* The default SLO state: none set, requests abandoned after 10 minutes of waiting. */
struct llm_slo llm_slo_default(void);
/* Writes an `engine:` block (two-space indent) with a comment per key. */
void llm_params_write(FILE *f, const struct llm_params *m);

#endif
