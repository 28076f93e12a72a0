/* Calibration of the engine model from the user's own benchmark results, and its replay. */
#include "sim/calibrate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "sim/bench.h"
#include "sim/llm_yaml.h"
#include "sim/model.h"

#define E err, errlen
#define MAX_FILES 64
#define DRAWS 5 /* arrival draws a prediction averages */

static int predict(const struct llm_params *m, const struct llm_bench *b, uint64_t seed,
                   struct llm_bench_pred *out) {
  struct llm_bench_pred acc = {0}, p;
  for (uint64_t s = 0; s < DRAWS; s++) {
    int rc = llm_bench_replay(m, b, seed + s, &p);
    if (rc)
      return rc;
    acc.ttft_mean_ms += p.ttft_mean_ms / DRAWS;
    acc.ttft_p50_ms += p.ttft_p50_ms / DRAWS;
    acc.ttft_p99_ms += p.ttft_p99_ms / DRAWS;
    acc.tpot_mean_ms += p.tpot_mean_ms / DRAWS;
    acc.itl_mean_ms += p.itl_mean_ms / DRAWS;
    acc.throughput += p.throughput / DRAWS;
  }
  *out = acc;
  return 0;
}

static double rel(double model, double meas) {
  return meas > 0 && isfinite(meas) ? model / meas - 1 : NAN;
}

static void json_num(FILE *f, const char *key, double v, bool comma) {
  if (isfinite(v))
    fprintf(f, "\"%s\": %.9g%s", key, v, comma ? ", " : "");
  else
    fprintf(f, "\"%s\": null%s", key, comma ? ", " : "");
}

static void json_figures(FILE *f, double ttft, double p99, double tpot, double thr) {
  fputc('{', f);
  json_num(f, "ttftMeanMs", ttft, true);
  json_num(f, "ttftP99Ms", p99, true);
  json_num(f, "tpotMeanMs", tpot, true);
  json_num(f, "throughputRps", thr, false);
  fputc('}', f);
}

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      fprintf(f, "\\%c", *s);
    else if ((unsigned char)*s < 0x20)
      fprintf(f, "\\u%04x", *s);
    else
      fputc(*s, f);
  }
  fputc('"', f);
}

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

/* The cell "measured / model (error)". */
static void cell(double meas, double model) {
  char a[24];
  if (isfinite(meas))
    snprintf(a, sizeof a, "%.1f", meas);
  else
    snprintf(a, sizeof a, "-");
  double r = rel(model, meas);
  if (isfinite(r))
    printf("  %8s / %8.1f %+5.0f%%", a, model, 100 * r);
  else
    printf("  %8s / %8.1f       ", a, model);
}

static int write_model(const char *path, const char *const *files, size_t n,
                       const struct llm_bench *b, const struct llm_params *m, const double *mae,
                       char *err, size_t errlen) {
  FILE *f = strcmp(path, "-") ? fopen(path, "w") : stdout;
  if (!f) {
    snprintf(err, errlen, "--out %s: cannot write it", path);
    return GS_EIO;
  }
  fprintf(f,
          "# An engine model fitted by `gpuscale simulate --calibrate` to %zu `vllm bench serve`\n"
          "# result file(s):\n",
          n);
  for (size_t i = 0; i < n; i++)
    fprintf(f, "#   %s (%g req/s)\n", base_name(files[i]), b[i].rate);
  fprintf(f,
          "# Mean absolute error over them: TTFT %.0f %%, TPOT %.0f %%, throughput %.0f %%.\n"
          "# Check it on other rates with `gpuscale simulate --model THIS --replay-bench FILE`.\n",
          100 * mae[0], 100 * mae[1], 100 * mae[2]);
  const char *name = b[0].model[0] ? base_name(b[0].model) : "calibrated";
  fprintf(f, "name: \"%s\"\ngpusPerReplica: 1             # the GPUs one replica holds\n", name);
  llm_params_write(f, m);
  int bad = ferror(f);
  if (f != stdout)
    bad |= fclose(f);
  if (bad) {
    snprintf(err, errlen, "--out %s: write failed", path);
    return GS_EIO;
  }
  return 0;
}

static int start_params(const char *model_path, struct llm_params *m, int *kv_given, char *err,
                        size_t errlen) {
  *m = llm_params_default();
  *kv_given = 0;
  if (!model_path)
    return 0;
  struct sim_model *sm = malloc(sizeof *sm);
  if (!sm)
    return GS_ENOMEM;
  int rc = sim_model_load(model_path, sm, E);
  if (!rc && !sm->llm.set) {
    snprintf(err, errlen, "%s: no engine block (stepBaseMs ...): nothing to start from",
             model_path);
    rc = GS_EINVAL;
  }
  if (!rc) {
    *m = sm->llm;
    *kv_given = sm->llm_kv_given;
  }
  free(sm);
  return rc;
}

int sim_calibrate(const char *const *files, size_t n, const char *model_path, const char *out_path,
                  bool json, uint64_t seed, char *err, size_t errlen) {
  if (n > MAX_FILES) {
    snprintf(err, errlen, "--calibrate: at most %d result files", MAX_FILES);
    return GS_EINVAL;
  }
  struct llm_bench *b = calloc(n, sizeof *b);
  struct llm_bench_pred *p = calloc(n, sizeof *p);
  int rc = b && p ? 0 : GS_ENOMEM;
  for (size_t i = 0; !rc && i < n; i++)
    rc = llm_bench_load(files[i], &b[i], E);
  struct llm_params m;
  int kv_given = 0;
  if (!rc)
    rc = start_params(model_path, &m, &kv_given, E);
  double score = 0, mae[3] = {0, 0, 0}, in = 0, out = 0;
  if (!rc && (rc = llm_bench_fit(b, n, &m, &score)) == GS_ENOMEM)
    snprintf(err, errlen, "out of memory");
  for (size_t i = 0; !rc && i < n; i++) {
    rc = predict(&m, &b[i], seed, &p[i]);
    mae[0] += fabs(rel(p[i].ttft_mean_ms, b[i].ttft_mean_ms)) / (double)n;
    mae[1] += fabs(rel(p[i].tpot_mean_ms, b[i].tpot_mean_ms)) / (double)n;
    mae[2] += fabs(rel(p[i].throughput, b[i].throughput)) / (double)n;
    in += b[i].in_mean / (double)n;
    out += b[i].out_mean / (double)n;
  }
  if (!rc) {
    m.in_mean = round(in);
    m.out_mean = round(out);
  }
  if (!rc && json) {
    printf("{\"engine\": {");
    json_num(stdout, "stepBaseMs", m.base_ms, true);
    json_num(stdout, "stepPerSequenceMs", m.seq_ms, true);
    json_num(stdout, "stepPerPrefillTokenMs", m.tok_ms, true);
    json_num(stdout, "maxNumSeqs", m.max_seqs, true);
    json_num(stdout, "maxNumBatchedTokens", m.budget, true);
    json_num(stdout, "kvCacheTokens", m.kv_tokens, false);
    printf("}, \"kvCacheTokensGiven\": %s, ", kv_given ? "true" : "false");
    json_num(stdout, "capacityRps", llm_capacity(&m, in, out), true);
    printf("\"files\": [");
    for (size_t i = 0; i < n; i++) {
      printf("%s{\"file\": ", i ? ", " : "");
      json_str(stdout, files[i]);
      printf(", ");
      json_num(stdout, "requestRate", b[i].rate, true);
      printf("\"measured\": ");
      json_figures(stdout, b[i].ttft_mean_ms, b[i].ttft_p99_ms, b[i].tpot_mean_ms, b[i].throughput);
      printf(", \"model\": ");
      json_figures(stdout, p[i].ttft_mean_ms, p[i].ttft_p99_ms, p[i].tpot_mean_ms, p[i].throughput);
      printf("}");
    }
    printf("], \"meanAbsErrorPercent\": {");
    json_num(stdout, "ttftMean", 100 * mae[0], true);
    json_num(stdout, "tpotMean", 100 * mae[1], true);
    json_num(stdout, "throughput", 100 * mae[2], false);
    printf("}}\n");
  } else if (!rc) {
    printf("gpuscale simulate --calibrate: %zu result file(s)%s%s\n", n, b[0].model[0] ? ", " : "",
           b[0].model);
    printf("fitted: stepBaseMs %.4g, stepPerSequenceMs %.4g, stepPerPrefillTokenMs %.4g, "
           "kvCacheTokens %.0f (%s); maxNumSeqs %.0f, maxNumBatchedTokens %.0f\n",
           m.base_ms, m.seq_ms, m.tok_ms, m.kv_tokens, kv_given ? "given" : "assumed", m.max_seqs,
           m.budget);
    if (!kv_given)
      printf("note: kvCacheTokens not given, so the cache is assumed never to bind; put the \"GPU "
             "KV cache size: N tokens\" your vLLM logs at start into --model's engine block\n");
    printf("capacity: %.2f requests/s per replica at the files' mean lengths (%.0f in, %.0f out)\n",
           llm_capacity(&m, in, out), in, out);
    printf("%-34s %6s  %-31s %-31s %-31s %-31s\n", "file (measured / model, error)", "req/s",
           "  TTFT mean ms", "  TTFT p99 ms", "  TPOT mean ms", "  throughput req/s");
    for (size_t i = 0; i < n; i++) {
      printf("%-34.34s %6g", base_name(files[i]), b[i].rate);
      cell(b[i].ttft_mean_ms, p[i].ttft_mean_ms);
      cell(b[i].ttft_p99_ms, p[i].ttft_p99_ms);
      cell(b[i].tpot_mean_ms, p[i].tpot_mean_ms);
      cell(b[i].throughput, p[i].throughput);
      printf("\n");
    }
    printf("mean absolute error: TTFT %.1f %%, TPOT %.1f %%, throughput %.1f %%\n", 100 * mae[0],
           100 * mae[1], 100 * mae[2]);
  }
  if (!rc && out_path)
    rc = write_model(out_path, files, n, b, &m, mae, E);
  free(b);
  free(p);
  return rc;
}

int sim_replay_bench(const char *model_path, const char *bench_path, bool json, uint64_t seed,
                     char *err, size_t errlen) {
  struct llm_params m;
  int kv_given;
  struct llm_bench b;
  struct llm_bench_pred p;
  int rc = start_params(model_path, &m, &kv_given, E);
  if (!rc)
    rc = llm_bench_load(bench_path, &b, E);
  if (!rc && (rc = predict(&m, &b, seed, &p)) == GS_ENOMEM)
    snprintf(err, errlen, "out of memory");
  if (rc)
    return rc;
  if (json) {
    printf("{\"measured\": ");
    json_figures(stdout, b.ttft_mean_ms, b.ttft_p99_ms, b.tpot_mean_ms, b.throughput);
    printf(", \"model\": ");
    json_figures(stdout, p.ttft_mean_ms, p.ttft_p99_ms, p.tpot_mean_ms, p.throughput);
    printf("}\n");
    return 0;
  }
  char rate[64];
  if (isfinite(b.rate))
    snprintf(rate, sizeof rate, "%g req/s (%s)", b.rate,
             b.burstiness == 1 ? "Poisson" : "gamma arrivals");
  else
    snprintf(rate, sizeof rate, "all at once");
  printf("gpuscale simulate --replay-bench %s: %.0f requests, %s, %.0f in / %.0f out tokens on "
         "average",
         base_name(bench_path), b.completed, rate, b.in_mean, b.out_mean);
  if (b.max_concurrency > 0)
    printf(", at most %.0f in flight", b.max_concurrency);
  printf("; one replica of the model, %d arrival draws from seed %llu\n", DRAWS,
         (unsigned long long)seed);
  printf("%-18s %10s %10s %8s\n", "", "measured", "model", "error");
  const char *names[] = {"TTFT mean ms", "TTFT p99 ms", "TPOT mean ms", "throughput req/s"};
  double meas[] = {b.ttft_mean_ms, b.ttft_p99_ms, b.tpot_mean_ms, b.throughput};
  double mod[] = {p.ttft_mean_ms, p.ttft_p99_ms, p.tpot_mean_ms, p.throughput};
  for (int i = 0; i < 4; i++) {
    double r = rel(mod[i], meas[i]);
    if (isfinite(meas[i]))
      printf("%-18s %10.2f %10.2f %+7.1f%%\n", names[i], meas[i], mod[i], 100 * r);
    else
      printf("%-18s %10s %10.2f %8s\n", names[i], "-", mod[i], "");
  }
  return 0;
}
