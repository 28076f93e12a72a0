/* Demand traces for the simulator: a CSV of (seconds, rate) points or a built-in shape, resampled
 * to one value per simulated second. */
#ifndef GS_SIM_TRACE_H
#define GS_SIM_TRACE_H

#include <stddef.h>
#include <stdint.h>

#define SIM_TRACE_MAX_S (31 * 86400) /* longest trace: 31 days at 1 s */
#define SIM_TRACE_MAX_POINTS 2000000
#define SIM_UNIX_EPOCH_MIN 1e9 /* a first point at or after this is a Unix time (2001 on) */

struct sim_trace {
  double *rate; /* n values, requests (work units) per second at second i; owned */
  /* a per-request trace: the input and output tokens of the requests arriving in second i, in
   * all (NULL for a rate trace); owned */
  double *in_tok, *out_tok;
  /* ... and its requests one by one, in arrival order (NULL for a rate trace): arrival seconds
   * from the trace's start, lengths; req_first[s] is the first request at or after second s
   * (n + 1 entries; a part of a trace shares its whole's arrays and offsets them by req_t0) */
  struct sim_req *req;
  size_t *req_first;
  double req_t0;
  size_t n;
  char name[96];
  char format[256]; /* what the file was read as ("per-request CSV (...), N requests") */
};

/* A per-request CSV's column names: the arrival time, the input and the output tokens. */
#define SIM_TRACE_COL_MAX 63
struct sim_trace_cols {
  char time[SIM_TRACE_COL_MAX + 1], input[SIM_TRACE_COL_MAX + 1], output[SIM_TRACE_COL_MAX + 1];
};
/* Parses --trace-columns "time=NAME,input=NAME,output=NAME" (all three). Returns 0 or GS_EINVAL
 * naming the key and what is allowed. */
int sim_trace_cols_parse(const char *s, struct sim_trace_cols *out, char *err, size_t errlen);

struct sim_req {
  double t;
  int32_t in, out;
};

/* The built-in shapes, "diurnal|bursty|step|weekend|morning|cron". */
#define SIM_TRACE_BUILTINS "diurnal|bursty|step|weekend|morning|cron"

/* A built-in shape with peak rate `peak`; duration_s 0 takes the shape's own (diurnal 1d,
 * bursty 6h, step 2h, weekend 7d, morning 1d, cron 1d). Deterministic for a given seed.
 * Returns 0, GS_ENOTFOUND (err lists the names), GS_EINVAL or GS_ENOMEM. */
int sim_trace_builtin(const char *name, int64_t duration_s, double peak, uint64_t seed,
                      struct sim_trace *out, char *err, size_t errlen);
/* A CSV trace: one "seconds,rate" point per line (a header line, blank lines and # comments
 * are allowed), seconds strictly increasing from >= 0, rate >= 0; linear between points, held
 * after the last. Seconds from SIM_UNIX_EPOCH_MIN on are Unix times and count from the first
 * point. duration_s 0 ends at the last point. Errors name file:line and the field. */
int sim_trace_csv(const char *text, size_t len, const char *file, int64_t duration_s,
                  struct sim_trace *out, char *err, size_t errlen);
/* A Prometheus /api/v1/query_range answer (JSON): every series' [unix_seconds, "value"] points,
 * summed per timestamp, counted from the first; NaN values are gaps. Same returns. */
int sim_trace_promjson(const char *text, size_t len, const char *file, int64_t duration_s,
                       struct sim_trace *out, char *err, size_t errlen);
/* A per-request CSV, the shape of Azure's public LLM inference traces: a header line naming
 * TIMESTAMP,ContextTokens,GeneratedTokens, then one request per line, its arrival time (seconds,
 * or "YYYY-MM-DD HH:MM:SS[.fraction]", non-decreasing), its input and its output tokens. Requests
 * are counted into the second they arrive in, from the first request's. At most
 * SIM_TRACE_MAX_POINTS requests, tokens at most SIM_TRACE_MAX_TOKENS a request. */
#define SIM_TRACE_MAX_TOKENS 10000000
int sim_trace_requests(const char *text, size_t len, const char *file, int64_t duration_s,
                       struct sim_trace *out, char *err, size_t errlen);
/* The same with other column names (cols; NULL: Azure's), the header's other columns ignored. */
int sim_trace_requests_cols(const char *text, size_t len, const char *file, int64_t duration_s,
                            const struct sim_trace_cols *cols, struct sim_trace *out, char *err,
                            size_t errlen);
/* True when the text's first line that is not blank or a comment is a per-request header (with
 * cols' names; NULL: Azure's). */
int sim_trace_is_requests(const char *text, size_t len);
int sim_trace_is_requests_cols(const char *text, size_t len, const struct sim_trace_cols *cols);
/* A built-in name, else a file path (read with the input cap): a query_range answer when it ends
 * in .json, else a CSV. */
int sim_trace_load(const char *spec, int64_t duration_s, double peak, uint64_t seed,
                   struct sim_trace *out, char *err, size_t errlen);
/* The same, with a per-request CSV's column names (NULL: Azure's). With cols given, a file
 * whose header lacks them is an error naming them, not a rate CSV. */
int sim_trace_load_cols(const char *spec, int64_t duration_s, double peak, uint64_t seed,
                        const struct sim_trace_cols *cols, struct sim_trace *out, char *err,
                        size_t errlen);
void sim_trace_free(struct sim_trace *t);
/* Seconds [from, from + n) of t, sharing t's arrays (not to be freed): rates, token sums and the
 * per-request index offset, so that second 0 of the part is second `from` of t. */
struct sim_trace sim_trace_part(const struct sim_trace *t, size_t from, size_t n);
/* K times the arrivals (K > 0): a rate trace's rates times K; each request of a per-request trace
 * arrives floor(K) times and once more with probability K - floor(K), each copy at a time drawn
 * uniformly within half a second of the original's, with the original's lengths. Deterministic for
 * a seed. Returns 0, GS_ENOMEM (t unchanged) or GS_ETOOBIG (over SIM_TRACE_MAX_POINTS requests). */
int sim_trace_scale(struct sim_trace *t, double k, uint64_t seed);

#endif
