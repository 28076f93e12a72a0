/* The step-time LLM engine model: each replica runs vLLM V1's scheduler one engine step at a time
 * over real requests (its own waiting queue, its running batch, its KV cache), and a step costs a
 * fixed base, plus a cost per decoding sequence, plus a cost per prefill token. A router sends
 * each request to one replica, where it stays. */
#ifndef GS_SIM_LLM_H
#define GS_SIM_LLM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The model file's `engine:` block (per replica). */
struct llm_params {
  bool set;
  double base_ms;   /* stepBaseMs: a step's fixed cost (weights read once per step) */
  double seq_ms;    /* stepPerSequenceMs: added per decoding sequence in the step */
  double tok_ms;    /* stepPerPrefillTokenMs: added per prompt token prefilled in the step */
  double max_seqs;  /* maxNumSeqs: sequences in the batch at most (--max-num-seqs) */
  double budget;    /* maxNumBatchedTokens: tokens one step schedules at most */
  double kv_tokens; /* kvCacheTokens: tokens the KV cache holds */
  double in_mean, out_mean; /* inputTokens, outputTokens: lengths when a trace gives rates */
  double spread;            /* lengthSpread: sigma of the log-normal lengths drawn for rates */
};

/* vLLM 0.8.5's V1 defaults for the OpenAI server (engine/arg_utils.py): 256 sequences, 8 192
 * batched tokens; later releases take 1 024 sequences on GPUs of 70 GiB and more. */
#define LLM_DEFAULT_MAX_SEQS 256
#define LLM_DEFAULT_BUDGET 8192
#define LLM_DEFAULT_SPREAD 0.6

/* What a vLLM server observes into its latency histograms (vllm/v1/metrics/loggers.py): time to
 * first token when the first token comes, queue time (arrival to first scheduled) when the
 * request finishes, and each gap between two tokens; per bucket, not cumulative. */
enum llm_obs { LLM_OBS_TTFT = 0, LLM_OBS_QUEUE, LLM_OBS_ITL, LLM_OBS__COUNT };
#define LLM_OBS_BUCKETS 24 /* +Inf included */
struct llm_obs_hist {
  double n[LLM_OBS_BUCKETS];
};
/* vLLM's bounds for family f (+Inf last); *nb their count. */
const double *llm_obs_bounds(enum llm_obs f, size_t *nb);

/* One request. `need` is the prompt left to prefill (after a preemption, the prompt and the output
 * so far, recomputed); `done` the output tokens emitted. Times in seconds. */
struct llm_req {
  double arrive, first, finish;
  double last_tok; /* when the last token came (inter-token gaps) */
  double sched_at; /* when it was first scheduled (queue time); 0 before */
  int32_t in, out, need, done;
  int32_t held;  /* tokens it holds in the KV cache */
  int32_t sched; /* tokens scheduled in the current step */
  uint32_t id;
  bool started;   /* its first token came */
  bool scheduled; /* it was scheduled once (sched_at is set) */
  bool fin;       /* it finished in the current step (llm.c) */
  int64_t gjoin;  /* the decoding group's step count when it joined it (llm.c) */
  int64_t gkey;   /* the group's step count at which its last token comes */
};

/* A replica: its waiting queue (a ring, preempted requests go back to its front), its running
 * batch in admission order, and its clock (the end of its last step). */
struct llm_pod {
  struct llm_req **wq;
  size_t whead, wlen, wcap;
  struct llm_req **run;
  size_t rlen, rcap;
  double clock;
  double kv; /* tokens the running requests hold */
  /* accumulated since the last llm_pod_take: time, and running, waiting and KV x time, busy time */
  double acc_t, acc_run, acc_wait, acc_kv, acc_busy;
  double first_max; /* the longest time to first token since the last take (NaN: none) */
  double prompt_tokens, gen_tokens; /* counters, as the engine's */
  double prompt_len_sum,
      prompt_len_n; /* finished requests' prompt lengths (request_prompt_tokens) */
  struct llm_obs_hist obs[LLM_OBS__COUNT]; /* latency observations since the start */
  uint64_t preemptions;
  bool oom;
  /* The decoding group (llm.c): running requests that decode a token in every step. Their done,
   * held and last_tok are written when they leave it; until then they lag by gsteps - gjoin. gh is
   * a min-heap on gkey; ng the other running requests, in run order, while `grouped`. */
  struct llm_req **gh, **ng;
  size_t gn, gcap, ngn, ngcap;
  int64_t gsteps;
  bool grouped;
  unsigned gwait, gbackoff; /* steps before trying to form the group again, and the next wait */
};

/* What a finished request is handed to. The callee owns r. */
typedef void (*llm_done_fn)(void *ud, struct llm_req *r);

void llm_pod_init(struct llm_pod *p, double now);
/* Frees the pod's arrays and every request it still holds. */
void llm_pod_free(struct llm_pod *p);
/* Queues r at the back (or the front). Returns 0 or GS_ENOMEM (r not queued, still the caller's).
 */
int llm_pod_push(struct llm_pod *p, struct llm_req *r, bool front);
/* Takes the oldest waiting request that has no token yet, or NULL. */
struct llm_req *llm_pod_pop(struct llm_pod *p);
/* Runs steps until the pod's clock reaches `until` (a step that starts before it ends after it),
 * handing finished requests to done. An idle pod's clock jumps to `until`. */
void llm_pod_advance(struct llm_pod *p, const struct llm_params *m, double until, llm_done_fn done,
                     void *ud);
/* Requests waiting and running now. */
size_t llm_pod_load(const struct llm_pod *p);
/* The time averages since the last take (running, waiting, KV %, busy share), then restarts them.
 * All 0 when no time passed. */
struct llm_avg {
  double running, waiting, kv_pct, busy;
  double ttft_max; /* the longest time to first token given in that time; NaN when none */
};
struct llm_avg llm_pod_take(struct llm_pod *p, const struct llm_params *m);
/* Abandons waiting requests without a first token that arrived before `before`, handing them to
 * gone. Returns how many. */
size_t llm_pod_expire(struct llm_pod *p, double before, llm_done_fn gone, void *ud);

/* Routers users run in front of the replicas. */
enum llm_route { LLM_ROUTE_ROUND_ROBIN = 0, LLM_ROUTE_LEAST_REQUESTS, LLM_ROUTE_PREFIX };
#define LLM_ROUTES "round-robin|least-requests|prefix-aware-approx"
int llm_route_parse(const char *s, enum llm_route *out);
const char *llm_route_name(enum llm_route r);
/* Picks one of n pods for a request with affinity key `key` (prefix-aware-approx); *rr is the
 * round-robin cursor. n > 0. */
size_t llm_route_pick(enum llm_route how, struct llm_pod *const *pods, size_t n, size_t *rr,
                      uint32_t key, const struct llm_params *m);

/* Requests per second one replica completes under steady overload at mean lengths (in, out): the
 * batch the sequences, KV cache and token budget allow, at that batch's step time. */
double llm_capacity(const struct llm_params *m, double in, double out);
/* A step's seconds with `seqs` decoding sequences and `prefill` prompt tokens. */
double llm_step_s(const struct llm_params *m, double seqs, double prefill);

/* A small deterministic generator (splitmix64) and the draws the model needs. */
double llm_urand(uint64_t *s);
/* An exponential gap with mean `mean`. */
double llm_exp(uint64_t *s, double mean);
/* A length from a log-normal with mean `mean` and sigma `sigma`, at least 1, at most
 * LLM_LENGTH_CAP x mean (vLLM's ShareGPT benchmark keeps prompts up to 1 024 tokens and prompt
 * plus output up to 2 048, 5 to 10 times its means). */
#define LLM_LENGTH_CAP 6
int32_t llm_length(uint64_t *s, double mean, double sigma);

/* Per-request outcomes and their summary. */
struct llm_stats {
  float *ttft, *tpot, *e2e; /* seconds; tpot NaN for a request of one output token */
  size_t n, cap;
  double itl_sum, itl_n; /* inter-token gaps */
  double abandoned, dropped, out_tokens;
  double first_arrive, last_finish;
  bool oom;
};
void llm_stats_add(struct llm_stats *s, const struct llm_req *r);
void llm_stats_free(struct llm_stats *s);

/* An SLO: a request meets it when its TTFT and its mean TPOT are within bounds (0 = no bound). */
struct llm_slo {
  bool set;
  double ttft_s, tpot_s, attainment; /* attainment in percent (99) */
  double timeout_s;                  /* a request waiting this long is abandoned */
};

struct llm_summary {
  double requests, completed, abandoned;
  double ttft_mean, ttft_p50, ttft_p90, ttft_p95, ttft_p99;
  double tpot_mean, tpot_p99, itl_mean, e2e_p99;
  double throughput; /* completed / (last finish - first arrival) */
  double attainment; /* percent of all requests (abandoned ones miss), NaN without an SLO */
  double goodput;    /* requests within the SLO per second */
  double abandoned_pct;
};
/* Summarises s against slo (NULL: no SLO). Returns 0 or GS_ENOMEM. */
int llm_summarize(const struct llm_stats *s, const struct llm_slo *slo, struct llm_summary *out);

#endif
