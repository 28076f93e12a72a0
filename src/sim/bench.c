/* vLLM benchmark results: read, replay on the engine model, fit. */
#include "sim/bench.h"

#include <json-c/json.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "sim/yamlx.h"

#define E err, errlen

/* ---- reading ---- */

static int num_of(json_object *root, const char *file, const char *key, bool required, double min,
                  double max, double *out, char *err, size_t errlen) {
  json_object *v;
  if (!json_object_object_get_ex(root, key, &v) || json_object_is_type(v, json_type_null)) {
    if (!required) {
      *out = NAN;
      return 0;
    }
    snprintf(err, errlen, "%s: %s: missing (a `vllm bench serve --save-result` file has it)", file,
             key);
    return GS_EINVAL;
  }
  if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int)) {
    snprintf(err, errlen, "%s: %s: %.40s: not a number (allowed: %g to %g)", file, key,
             json_object_to_json_string(v), min, max);
    return GS_EINVAL;
  }
  double d = json_object_get_double(v);
  if (!isfinite(d) || d < min || d > max) {
    snprintf(err, errlen, "%s: %s: %g: out of range (allowed: %g to %g)", file, key, d, min, max);
    return GS_EINVAL;
  }
  *out = d;
  return 0;
}

int llm_bench_parse(const char *text, size_t len, const char *file, struct llm_bench *b, char *err,
                    size_t errlen) {
  memset(b, 0, sizeof *b);
  snprintf(b->file, sizeof b->file, "%s", file);
  if (len > LLM_BENCH_MAX_BYTES) {
    snprintf(err, errlen, "%s: %zu bytes: over the %u MiB a result file may have", file, len,
             LLM_BENCH_MAX_BYTES >> 20);
    return GS_ETOOBIG;
  }
  json_tokener *tok = json_tokener_new_ex(16);
  if (!tok)
    return GS_ENOMEM;
  json_object *root = json_tokener_parse_ex(tok, text, (int)len);
  enum json_tokener_error je = json_tokener_get_error(tok);
  json_tokener_free(tok);
  if (!root || je != json_tokener_success) {
    snprintf(err, errlen, "%s: not a JSON result file (%s)", file,
             je == json_tokener_continue ? "truncated" : json_tokener_error_desc(je));
    json_object_put(root);
    return GS_EPARSE;
  }
  int rc = 0;
  if (!json_object_is_type(root, json_type_object)) {
    snprintf(err, errlen, "%s: not a JSON object (a `vllm bench serve --save-result` file is one)",
             file);
    rc = GS_EPARSE;
  }
  /* request_rate is a number, or the string "inf" (benchmark_serving.py writes it so) */
  json_object *v;
  if (!rc && json_object_object_get_ex(root, "request_rate", &v) &&
      json_object_is_type(v, json_type_string)) {
    const char *s = json_object_get_string(v);
    if (strcmp(s, "inf") && strcmp(s, "Infinity")) {
      snprintf(err, errlen, "%s: request_rate: \"%.40s\": not a rate (a number > 0, or \"inf\")",
               file, s);
      rc = GS_EINVAL;
    }
    b->rate = INFINITY;
  } else if (!rc) {
    rc = num_of(root, file, "request_rate", true, 1e-6, 1e6, &b->rate, E);
  }
  double in_tot = 0, out_tot = 0, conc = NAN, burst = NAN;
  if (!rc)
    rc = num_of(root, file, "completed", true, 1, LLM_BENCH_MAX_REQUESTS, &b->completed, E);
  if (!rc)
    rc = num_of(root, file, "total_input_tokens", true, 1, 1e12, &in_tot, E);
  if (!rc)
    rc = num_of(root, file, "total_output_tokens", true, 1, 1e12, &out_tot, E);
  if (!rc)
    rc = num_of(root, file, "mean_ttft_ms", true, 0, 1e9, &b->ttft_mean_ms, E);
  if (!rc)
    rc = num_of(root, file, "mean_tpot_ms", true, 0, 1e9, &b->tpot_mean_ms, E);
  if (!rc)
    rc = num_of(root, file, "request_throughput", true, 1e-9, 1e9, &b->throughput, E);
  if (!rc)
    rc = num_of(root, file, "p99_ttft_ms", false, 0, 1e9, &b->ttft_p99_ms, E);
  if (!rc)
    rc = num_of(root, file, "median_ttft_ms", false, 0, 1e9, &b->ttft_p50_ms, E);
  if (!rc)
    rc = num_of(root, file, "mean_itl_ms", false, 0, 1e9, &b->itl_mean_ms, E);
  if (!rc)
    rc = num_of(root, file, "max_concurrency", false, 1, 1e7, &conc, E);
  if (!rc)
    rc = num_of(root, file, "burstiness", false, 1e-3, 1e3, &burst, E);
  if (!rc) {
    b->in_mean = in_tot / b->completed;
    b->out_mean = out_tot / b->completed;
    b->max_concurrency = isnan(conc) ? 0 : conc;
    b->burstiness = isnan(burst) ? 1 : burst;
    if (b->in_mean > 1e6 || b->out_mean > 1e6) {
      snprintf(err, errlen, "%s: total_input_tokens / completed: %g tokens a request: over 1e6",
               file, b->in_mean > b->out_mean ? b->in_mean : b->out_mean);
      rc = GS_EINVAL;
    }
  }
  if (!rc && json_object_object_get_ex(root, "model_id", &v) &&
      json_object_is_type(v, json_type_string))
    snprintf(b->model, sizeof b->model, "%s", json_object_get_string(v));
  json_object_put(root);
  return rc;
}

int llm_bench_load(const char *path, struct llm_bench *out, char *err, size_t errlen) {
  char *text;
  size_t len;
  int rc = sim_read_file(path, LLM_BENCH_MAX_BYTES, &text, &len, E);
  if (rc)
    return rc;
  rc = llm_bench_parse(text, len, path, out, E);
  free(text);
  return rc;
}

/* ---- replay ---- */

/* A gamma draw (Marsaglia and Tsang), the gap vLLM's benchmark sleeps between requests. */
static double gamma_draw(uint64_t *s, double shape, double scale) {
  if (shape < 1)
    return gamma_draw(s, shape + 1, scale) * pow(llm_urand(s), 1 / shape);
  double d = shape - 1.0 / 3, c = 1 / sqrt(9 * d);
  for (;;) {
    double u1 = llm_urand(s), u2 = llm_urand(s);
    double x = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2), v = 1 + c * x;
    if (v <= 0)
      continue;
    v = v * v * v;
    double u = llm_urand(s);
    if (log(u) < 0.5 * x * x + d - d * v + d * log(v))
      return d * v * scale;
  }
}

struct replay {
  struct llm_stats st;
  double inflight, limit, free_at;
};

static void replay_done(void *ud, struct llm_req *r) {
  struct replay *rp = ud;
  llm_stats_add(&rp->st, r);
  if (rp->limit > 0 && rp->inflight >= rp->limit)
    rp->free_at = isfinite(r->finish) ? r->finish : rp->free_at;
  rp->inflight -= 1;
  free(r);
}

int llm_bench_replay(const struct llm_params *m, const struct llm_bench *b, uint64_t seed,
                     struct llm_bench_pred *out) {
  size_t n = (size_t)b->completed;
  uint64_t s = seed * 0x9e3779b97f4a7c15ULL + 1;
  struct replay rp = {0};
  rp.limit = b->max_concurrency;
  struct llm_pod pod;
  llm_pod_init(&pod, 0);
  double t = 0;
  size_t i = 0;
  int rc = 0;
  for (;;) {
    while (i < n && t <= pod.clock && (rp.limit <= 0 || rp.inflight < rp.limit)) {
      struct llm_req *r = calloc(1, sizeof *r);
      if (!r) {
        rc = GS_ENOMEM;
        break;
      }
      r->arrive = t > rp.free_at ? t : rp.free_at;
      r->in = llm_length(&s, b->in_mean, m->spread);
      r->out = llm_length(&s, b->out_mean, m->spread);
      r->need = r->in;
      r->id = (uint32_t)i;
      if (llm_pod_push(&pod, r, false)) {
        free(r);
        rc = GS_ENOMEM;
        break;
      }
      rp.inflight += 1;
      i++;
      if (isfinite(b->rate))
        t += b->burstiness == 1 ? llm_exp(&s, 1 / b->rate)
                                : gamma_draw(&s, b->burstiness, 1 / (b->rate * b->burstiness));
    }
    if (rc || (i >= n && !llm_pod_load(&pod)))
      break;
    bool room = i < n && (rp.limit <= 0 || rp.inflight < rp.limit);
    if (!llm_pod_load(&pod)) {
      pod.clock = t; /* idle until the next request */
      continue;
    }
    /* to the next request, or one step when none can be sent before a request finishes */
    llm_pod_advance(&pod, m, room && t > pod.clock ? t : pod.clock + 1e-9, replay_done, &rp);
  }
  llm_pod_free(&pod);
  struct llm_summary sum;
  if (!rc && (rp.st.oom || pod.oom))
    rc = GS_ENOMEM;
  if (!rc)
    rc = llm_summarize(&rp.st, NULL, &sum);
  if (!rc) {
    out->ttft_mean_ms = sum.ttft_mean * 1000;
    out->ttft_p50_ms = sum.ttft_p50 * 1000;
    out->ttft_p99_ms = sum.ttft_p99 * 1000;
    out->tpot_mean_ms = sum.tpot_mean * 1000;
    out->itl_mean_ms = sum.itl_mean * 1000;
    /* the benchmark's duration runs from its first request to its last answer */
    out->throughput = sum.throughput;
  }
  llm_stats_free(&rp.st);
  return rc;
}

/* ---- fitting ---- */

#define FIT_SEEDS 2
#define FIT_DIM 3

struct fit {
  const struct llm_bench *b;
  size_t n;
  struct llm_params base;
  bool oom;
};

static void params_of(const struct fit *f, const double *x, struct llm_params *m) {
  *m = f->base;
  m->base_ms = exp(x[0]);
  m->seq_ms = exp(x[1]);
  m->tok_ms = exp(x[2]);
}

static double sq_log(double model, double meas) {
  if (!(meas > 0) || !isfinite(meas))
    return 0;
  if (!(model > 0) || !isfinite(model))
    return 25; /* far off: (log 150)^2 */
  double l = log(model / meas);
  return l * l;
}

/* Mean squared log error over the files' mean TTFT, mean TPOT and throughput (each weight 1) and
 * p99 TTFT (weight 1/4), averaged over a few arrival draws. */
static double score_of(struct fit *f, const double *x) {
  struct llm_params m;
  params_of(f, x, &m);
  double total = 0, terms = 0;
  for (size_t i = 0; i < f->n; i++)
    for (uint64_t seed = 1; seed <= FIT_SEEDS; seed++) {
      struct llm_bench_pred p;
      if (llm_bench_replay(&m, &f->b[i], seed, &p)) {
        f->oom = true;
        return INFINITY;
      }
      total += sq_log(p.ttft_mean_ms, f->b[i].ttft_mean_ms) +
               sq_log(p.tpot_mean_ms, f->b[i].tpot_mean_ms) +
               sq_log(p.throughput, f->b[i].throughput) +
               0.25 * sq_log(p.ttft_p99_ms, f->b[i].ttft_p99_ms);
      terms += 3.25;
    }
  return terms > 0 ? total / terms : INFINITY;
}

/* Nelder-Mead in log space: few parameters, a noisy but smooth objective (common random numbers:
 * the same seeds for every point). */
static double nelder_mead(struct fit *f, double *x0, const double *step, int iters) {
  const int d = FIT_DIM;
  double p[FIT_DIM + 1][FIT_DIM], v[FIT_DIM + 1];
  for (int i = 0; i <= d; i++) {
    memcpy(p[i], x0, sizeof p[i]);
    if (i > 0)
      p[i][i - 1] += step[i - 1];
    v[i] = score_of(f, p[i]);
  }
  for (int it = 0; it < iters && !f->oom; it++) {
    /* order: best first */
    for (int i = 1; i <= d; i++)
      for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
        double tv = v[j];
        v[j] = v[j - 1];
        v[j - 1] = tv;
        double tp[FIT_DIM];
        memcpy(tp, p[j], sizeof tp);
        memcpy(p[j], p[j - 1], sizeof tp);
        memcpy(p[j - 1], tp, sizeof tp);
      }
    double c[FIT_DIM] = {0}, xr[FIT_DIM], xe[FIT_DIM], xc[FIT_DIM];
    for (int i = 0; i < d; i++)
      for (int k = 0; k < d; k++)
        c[k] += p[i][k] / d;
    for (int k = 0; k < d; k++)
      xr[k] = c[k] + (c[k] - p[d][k]);
    double vr = score_of(f, xr);
    if (vr < v[0]) {
      for (int k = 0; k < d; k++)
        xe[k] = c[k] + 2 * (c[k] - p[d][k]);
      double ve = score_of(f, xe);
      memcpy(p[d], ve < vr ? xe : xr, sizeof p[d]);
      v[d] = ve < vr ? ve : vr;
    } else if (vr < v[d - 1]) {
      memcpy(p[d], xr, sizeof p[d]);
      v[d] = vr;
    } else {
      for (int k = 0; k < d; k++)
        xc[k] = c[k] + 0.5 * (p[d][k] - c[k]);
      double vc = score_of(f, xc);
      if (vc < v[d]) {
        memcpy(p[d], xc, sizeof p[d]);
        v[d] = vc;
      } else { /* shrink toward the best */
        for (int i = 1; i <= d; i++) {
          for (int k = 0; k < d; k++)
            p[i][k] = p[0][k] + 0.5 * (p[i][k] - p[0][k]);
          v[i] = score_of(f, p[i]);
        }
      }
    }
  }
  int best = 0;
  for (int i = 1; i <= d; i++)
    if (v[i] < v[best])
      best = i;
  memcpy(x0, p[best], sizeof p[best]);
  return v[best];
}

int llm_bench_fit(const struct llm_bench *b, size_t n, struct llm_params *m, double *score) {
  if (!n)
    return GS_EINVAL;
  struct fit f = {b, n, *m, false};
  /* a start from the lightest load: a step there is about one TPOT, and its TTFT about half a
   * step of wait plus one step with the prompt's prefill */
  size_t lo = 0;
  for (size_t i = 0; i < n; i++)
    if (b[i].rate < b[lo].rate)
      lo = i;
  double tpot = b[lo].tpot_mean_ms > 0.1 ? b[lo].tpot_mean_ms : 10;
  double pre = b[lo].ttft_mean_ms - 1.5 * tpot;
  double x[FIT_DIM] = {log(0.9 * tpot), log(0.01 * tpot / 2),
                       log(pre > 0 ? pre / b[lo].in_mean : 1e-3)};
  double step[FIT_DIM] = {0.3, 1.5, 1.0};
  double best = INFINITY;
  /* restarts from the last best escape the simplex's early collapse */
  for (int round = 0; round < 4 && !f.oom; round++)
    best = nelder_mead(&f, x, step, 100);
  if (f.oom)
    return GS_ENOMEM;
  params_of(&f, x, m);
  *score = best;
  return 0;
}
