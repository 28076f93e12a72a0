/* libFuzzer target for the streaming reader of Prometheus answers (promjson.c): the input is one
 * query_range answer, fed in pieces whose size the input's length picks (so that tokens, keys and
 * numbers are cut at every place across runs); every series is folded by the analyser as the real
 * pipeline does. */
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
  enum rs_metric m = (enum rs_metric)(size % RS_M_COUNT);
  char err[256];
  size_t n = 0;
  /* whole, as rs_prom_parse reads a kept body */
  rs_prom_parse((const char *)data, size, m, &sink, &n, err, sizeof(err));
  /* in pieces of 1 to 61 bytes, as the network hands them; a cap of series on the way */
  struct rs_prom_limits lim = {0, 1 + size % 5, 0};
  struct rs_prom_reader *r = rs_prom_reader_new(m, &sink, &lim);
  if (r) {
    size_t piece = 1 + size % 61;
    for (size_t at = 0; at < size; at += piece)
      if (rs_prom_reader_feed(r, (const char *)data + at, size - at < piece ? size - at : piece))
        break;
    rs_prom_reader_finish(r, &n);
    (void)rs_prom_reader_error(r);
    rs_prom_reader_free(r);
  }
  struct rs_report rep;
  rs_report_init(&rep);
  rs_analyzer_finish(a, &rep);
  rs_report_free(&rep);
  rs_analyzer_free(a);
  return 0;
}
