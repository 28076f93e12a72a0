/* A continuous-batching LLM server (vLLM, SGLang, TGI) as a fluid model, one simulated second at
 * a time: requests wait in a FIFO queue, are admitted while the batch has a free sequence slot
 * (maxNumSeqs), room in the KV cache and prefill budget, and run until their output tokens are
 * decoded. num_requests_running, num_requests_waiting and KV usage then follow from the requests'
 * token lengths by Little's law; nothing is written as a linear function of load. The request
 * FIFO also gives each request's queueing delay (docs/simulate.md "Continuous batching"). */
#ifndef GS_SIM_BATCH_H
#define GS_SIM_BATCH_H

#include <stdbool.h>
#include <stddef.h>

/* The model keys under `batching:` (per replica). */
struct sim_batching {
  bool set;
  double max_num_seqs;  /* maxNumSeqs: sequences in the batch at most (vLLM's max_num_seqs) */
  double kv_tokens;     /* kvCacheTokens: tokens the KV cache holds */
  double prefill_tps;   /* prefillTokensPerSecond: prompt tokens per second, the whole GPU */
  double decode_tps;    /* decodeTokensPerSecond: generated tokens per second, a full batch */
  double stream_tps;    /* streamTokensPerSecond: one sequence's decode speed (small batch) */
  double input_tokens;  /* inputTokens, outputTokens: a request's lengths when the trace gives */
  double output_tokens; /* rates only */
};

/* The replica's throughput in requests per second at mean lengths (in, out): the rate at which it
 * saturates (its batch full, its KV cache full, or its compute busy). */
double sim_batch_capacity(const struct sim_batching *b, double in, double out);

/* The workload's batching state: totals over its ready pods, which the Service balances evenly. */
struct sim_batch {
  double run, run_in, run_out;    /* running requests and their input / output tokens */
  double wait, wait_in, wait_out; /* waiting requests (the FIFO's content) */
};

/* What one second did, per pod unless said otherwise. */
struct sim_batch_step {
  double admitted, completed, dropped; /* requests, the workload's totals */
  double running, waiting;             /* time-averaged over the second (Little's law) */
  double kv_pct;                       /* KV cache used, % */
  double inflight_pct;                 /* (running + waiting) / maxNumSeqs, % */
  double busy;                         /* the share of the replica's compute used (0..1) */
  double prefill_s;                    /* one admitted request's prefill time at this load */
};

/* One second: `arrivals` requests with in_tok / out_tok tokens in all arrive at `ready` pods,
 * which hold at most queue_per_pod waiting each (more are dropped). */
void sim_batch_step(const struct sim_batching *b, struct sim_batch *st, int ready,
                    double queue_per_pod, double arrivals, double in_tok, double out_tok,
                    struct sim_batch_step *out);

/* The request FIFO's delays: arrivals enter at their second, admissions take the oldest, drops
 * take the newest. A histogram of the delays (1 s bins), weighted by requests. */
#define SIM_WAIT_BINS 7200
struct sim_wait {
  double *t, *mass; /* ring of (arrival second, requests) */
  size_t cap, head, len;
  double hist[SIM_WAIT_BINS + 1]; /* the last bin: longer */
  double total;
  bool oom;
};
void sim_wait_arrive(struct sim_wait *w, double now, double mass);
void sim_wait_admit(struct sim_wait *w, double now, double mass);
void sim_wait_drop(struct sim_wait *w, double mass);
/* Counts what still waits at `now` with its delay so far. */
void sim_wait_finish(struct sim_wait *w, double now);
/* The q-quantile of the delays in seconds (0 when nothing was admitted). */
double sim_wait_quantile(const struct sim_wait *w, double q);
void sim_wait_free(struct sim_wait *w);

#endif
