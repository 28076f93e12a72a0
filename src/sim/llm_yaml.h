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
/* Writes an `engine:` block (two-space indent) with a comment per key. */
void llm_params_write(FILE *f, const struct llm_params *m);

#endif
