/* libFuzzer target for mock scenario YAML and replay CSV, parsed from memory (no file access). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "collect/scenario.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[512];
  struct scenario *s = NULL;
  /* base_dir NULL: csv patterns are refused, so an input never names a file to open */
  if (scenario_parse((const char *)data, size, "fuzz.yaml", NULL, &s, err, sizeof err) == 0) {
    static const double times[] = {0, 0.5, 29.999, 30, 59.9, 3600, 1e9};
    for (size_t g = 0; g < s->ngpus; g++)
      for (size_t k = 0; k < sizeof times / sizeof times[0]; k++) {
        struct gpu_sample smp = {0};
        (void)scenario_fill(s, g, times[k], &smp, err, sizeof err);
        for (int f = 0; f < GF__COUNT; f++) {
          double v;
          if (scenario_eval(s, g, (enum gpu_field)f, times[k], &v) == 0 && v != v)
            abort(); /* a pattern must never produce NaN */
        }
      }
    scenario_free(s);
  }
  struct pattern_point *pts = NULL;
  size_t n = 0;
  if (scenario_csv_parse((const char *)data, size, "fuzz.csv", &pts, &n, err, sizeof err) == 0)
    free(pts);
  return 0;
}
