/* libFuzzer target for rs_prom_parse: the input is one Prometheus query_range answer; every
 * parsed series is fed through the analyser as the real pipeline does. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rightsize/analyze.h"
#include "rightsize/prom.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct rs_params p;
  rs_params_default(&p);
  p.step_ms = 300000;
  struct rs_analyzer *a = rs_analyzer_new(&p, 1767225000000LL - 3600000, 1767225000000LL);
  if (!a)
    return 0;
  rs_analyzer_begin_chunk(a, 1767225000000LL - 3600000, 1767225000000LL);
  struct rs_sink sink = {rs_analyzer_add, a};
  char err[256];
  size_t n = 0;
  rs_prom_parse((const char *)data, size, (enum rs_metric)(size % RS_M_COUNT), &sink, &n, err,
                sizeof(err));
  struct rs_report r;
  rs_report_init(&r);
  rs_analyzer_finish(a, &r);
  rs_report_free(&r);
  rs_analyzer_free(a);
  return 0;
}
