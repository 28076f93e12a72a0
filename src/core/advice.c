/* The recommended trigger per inference engine: one table that --help, lint and the docs follow. */
#include "core/advice.h"

#include <string.h>

const struct engine_advice engine_advice[] = {
    {"vllm", "vLLM", "vllm-in-flight", "maxNumSeqs, pods", "vllm-inference, vllm-queue-depth",
     "memory is reserved at start; a queue alone cannot hold a size"},
    {"sglang", "SGLang", "sglang-in-flight", "maxNumSeqs, pods", "sglang-queue-depth",
     "a queue alone cannot hold a size"},
    {"tgi", "TGI", "tgi-in-flight", "maxNumSeqs, pods", "tgi-inference, tgi-queue-size",
     "memory is reserved at warm-up; a queue alone cannot hold a size"},
    {"triton", "Triton", "triton-queue-wait", "pods", "", ""},
};
const size_t engine_advice_count = sizeof engine_advice / sizeof engine_advice[0];

/* Whether `name` is one of the ", "-separated names in `list`. */
static int in_list(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == n && !strncmp(p, name, n))
      return 1;
    if (!end)
      break;
    p = end + 1;
    while (*p == ' ')
      p++;
  }
  return 0;
}

const struct engine_advice *advice_for_profile(const char *profile, int *against) {
  for (size_t i = 0; i < engine_advice_count; i++) {
    const struct engine_advice *a = &engine_advice[i];
    if (!strcmp(a->profile, profile)) {
      *against = 0;
      return a;
    }
    if (in_list(a->against, profile)) {
      *against = 1;
      return a;
    }
  }
  *against = 0;
  return NULL;
}

void advice_print(FILE *f) {
  fprintf(f, "Recommended trigger per engine (the gateway, workload scope; docs/engines.md):\n");
  for (size_t i = 0; i < engine_advice_count; i++) {
    const struct engine_advice *a = &engine_advice[i];
    fprintf(f, "  %-7s profile: %s (with %s)", a->label, a->profile, a->keys);
    if (a->against[0])
      fprintf(f, "; advised against: %s", a->against);
    fputc('\n', f);
  }
}
