/* The recommended trigger per inference engine: one table that --help, lint and the docs follow. */
#include "core/advice.h"

#include <string.h>

#define QUEUE_ALONE "a queue alone is 0 below saturation and cannot hold a size"
/* Requests in flight at half the batch hold a size; the p95 queue time beside them adds replicas
 * as soon as requests wait (0 on an unloaded replica whatever the model, so one target fits all):
 * replayed against an SLO on real traces, docs/simulate-llm.md "Evidence on real demand". */
#define IN_FLIGHT_KEYS "maxNumSeqs, pods, targetValue 50"
#define QUEUE_BESIDE(m) "metricType: " m " (Value, quantile 0.95, targetValue 0.5, pods)"
const struct engine_advice engine_advice[] = {
    {"vllm",
     "vLLM",
     "vllm-in-flight",
     IN_FLIGHT_KEYS,
     QUEUE_BESIDE("vllm_queue_time_seconds"),
     {"vllm-inference", "vllm-queue-depth", NULL},
     {"GPU memory is reserved at start and does not follow the load", QUEUE_ALONE, NULL}},
    {"sglang",
     "SGLang",
     "sglang-in-flight",
     IN_FLIGHT_KEYS,
     QUEUE_BESIDE("sglang_queue_time_seconds"),
     {"sglang-queue-depth", NULL},
     {QUEUE_ALONE, NULL}},
    {"tgi",
     "TGI",
     "tgi-in-flight",
     IN_FLIGHT_KEYS,
     QUEUE_BESIDE("tgi_queue_time_seconds"),
     {"tgi-inference", "tgi-queue-size", NULL},
     {"GPU memory is reserved at warm-up and does not follow the load", QUEUE_ALONE, NULL}},
    {"triton", "Triton", "triton-queue-wait", "pods", NULL, {NULL}, {NULL}},
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
    if (a->beside)
      fprintf(f, ", beside %s", a->beside);
    for (size_t j = 0; a->against[j]; j++)
      fprintf(f, "%s%s", j ? ", " : "; advised against: ", a->against[j]);
    fputc('\n', f);
  }
}
