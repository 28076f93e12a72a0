/* The recommended trigger per inference engine: one table that --help, lint and the docs follow. */
#include "core/advice.h"

#include <string.h>

#define QUEUE_ALONE "a queue alone is 0 below saturation and cannot hold a size"
const struct engine_advice engine_advice[] = {
    {"vllm",
     "vLLM",
     "vllm-in-flight",
     "maxNumSeqs, pods",
     {"vllm-inference", "vllm-queue-depth", NULL},
     {"GPU memory is reserved at start and does not follow the load", QUEUE_ALONE, NULL}},
    {"sglang",
     "SGLang",
     "sglang-in-flight",
     "maxNumSeqs, pods",
     {"sglang-queue-depth", NULL},
     {QUEUE_ALONE, NULL}},
    {"tgi",
     "TGI",
     "tgi-in-flight",
     "maxNumSeqs, pods",
     {"tgi-inference", "tgi-queue-size", NULL},
     {"GPU memory is reserved at warm-up and does not follow the load", QUEUE_ALONE, NULL}},
    {"triton", "Triton", "triton-queue-wait", "pods", {NULL}, {NULL}},
};
const size_t engine_advice_count = sizeof engine_advice / sizeof engine_advice[0];

const struct engine_advice *advice_for_profile(const char *profile, const char **why) {
  *why = NULL;
  for (size_t i = 0; i < engine_advice_count; i++) {
    const struct engine_advice *a = &engine_advice[i];
    if (!strcmp(a->profile, profile))
      return a;
    for (size_t j = 0; a->against[j]; j++)
      if (!strcmp(a->against[j], profile)) {
        *why = a->why[j];
        return a;
      }
  }
  return NULL;
}

void advice_print(FILE *f) {
  fprintf(f, "Recommended trigger per engine (the gateway, workload scope; docs/engines.md):\n");
  for (size_t i = 0; i < engine_advice_count; i++) {
    const struct engine_advice *a = &engine_advice[i];
    fprintf(f, "  %-7s profile: %s (with %s)", a->label, a->profile, a->keys);
    for (size_t j = 0; a->against[j]; j++)
      fprintf(f, "%s%s", j ? ", " : "; advised against: ", a->against[j]);
    fputc('\n', f);
  }
}
