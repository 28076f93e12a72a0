/* libFuzzer target for `vllm bench serve --save-result` files (sim/bench.h): any bytes parse to a
 * clear error or to a benchmark whose replay, capped in size, gives finite figures. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "sim/bench.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[512];
  struct llm_bench b;
  if (llm_bench_parse((const char *)data, size, "fuzz.json", &b, err, sizeof err) != 0)
    return 0;
  if (!(b.completed >= 1) || !(b.in_mean > 0) || !(b.out_mean > 0))
    abort();
  /* a short replay: at most 50 requests of bounded length */
  if (b.completed > 50)
    b.completed = 50;
  if (b.in_mean > 4000)
    b.in_mean = 4000;
  if (b.out_mean > 500)
    b.out_mean = 500;
  struct llm_params m = {true, 10, 0.01, 0.01, 16, 2048, 1e5, 0, 0, LLM_DEFAULT_SPREAD};
  struct llm_bench_pred p;
  if (llm_bench_replay(&m, &b, 1, &p) == 0 && !(p.ttft_mean_ms >= 0))
    abort();
  return 0;
}
