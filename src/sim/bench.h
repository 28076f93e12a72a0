/* `vllm bench serve --save-result` results (vLLM's benchmarks/benchmark_serving.py): read them,
 * replay one on the step-time engine model, and fit the model's step costs to several. */
#ifndef GS_SIM_BENCH_H
#define GS_SIM_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "sim/llm.h"

#define LLM_BENCH_MAX_BYTES (4u << 20) /* a result file (per-request lists included) */
#define LLM_BENCH_MAX_REQUESTS 1000000

/* One result file: what the benchmark sent and what it measured. */
struct llm_bench {
  char file[256];
  char model[128];          /* model_id, when given */
  double rate;              /* request_rate; INFINITY for "inf" (all at once) */
  double burstiness;        /* gamma shape of the gaps; 1 (Poisson) when not given */
  double max_concurrency;   /* 0 when unlimited */
  double completed;         /* requests */
  double in_mean, out_mean; /* total_input_tokens, total_output_tokens per completed request */
  /* measured */
  double ttft_mean_ms, ttft_p50_ms, ttft_p99_ms, tpot_mean_ms, itl_mean_ms, throughput;
  /* p50, p99, itl: NaN when absent */
};

/* Parses one result file's JSON. Returns 0, GS_EPARSE (not JSON, or truncated) or GS_EINVAL (a
 * required key missing or out of range), err naming the file, the key and what is allowed. */
int llm_bench_parse(const char *text, size_t len, const char *file, struct llm_bench *out,
                    char *err, size_t errlen);
int llm_bench_load(const char *path, struct llm_bench *out, char *err, size_t errlen);

/* What the model predicts for one benchmark. */
struct llm_bench_pred {
  double ttft_mean_ms, ttft_p50_ms, ttft_p99_ms, tpot_mean_ms, itl_mean_ms, throughput;
};
/* Replays b on one replica of m: its request count, Poisson (gamma) arrivals at its rate from
 * seed, or all at once for inf, log-normal lengths with its means, its concurrency limit.
 * Returns 0 or GS_ENOMEM. */
int llm_bench_replay(const struct llm_params *m, const struct llm_bench *b, uint64_t seed,
                     struct llm_bench_pred *out);

/* Fits m's step costs (stepBaseMs, stepPerSequenceMs, stepPerPrefillTokenMs) to the n
 * benchmarks; maxNumSeqs, maxNumBatchedTokens, kvCacheTokens and lengthSpread stay as given (a
 * cache that light loads never fill cannot be fitted: its size is what vLLM logs at start).
 * *score is the mean squared log error. Returns 0, GS_EINVAL (n 0) or GS_ENOMEM. */
int llm_bench_fit(const struct llm_bench *b, size_t n, struct llm_params *m, double *score);

#endif
