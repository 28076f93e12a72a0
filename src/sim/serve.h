/* The workload's replicas serving requests on the step-time engine model (sim/llm.h): arrivals
 * from the trace (its own requests with their lengths, or Poisson draws from its rates), the
 * router in front of the Ready pods, a queue and a batch per pod, and every request's outcome
 * (TTFT, TPOT, abandoned) against the SLO. The simulation loop says each second which pods are
 * Ready, draining or gone. */
#ifndef GS_SIM_SERVE_H
#define GS_SIM_SERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/engine.h"
#include "core/latency.h"
#include "sim/llm.h"
#include "sim/model.h"
#include "sim/trace.h"

struct sim_serve;

/* Returns 0 or GS_ENOMEM. */
int sim_serve_new(const struct sim_model *m, const struct sim_trace *tr, uint64_t seed,
                  struct sim_serve **out);
void sim_serve_free(struct sim_serve *s);

/* A pod's state as the loop has it. */
enum sim_serve_state { SERVE_READY = 0, SERVE_DRAINING };
struct sim_serve_pod {
  int id;
  enum sim_serve_state state;
};

/* What one second did. */
struct sim_serve_step {
  double arrived, completed, abandoned;
  double waiting;  /* requests waiting anywhere (router and pods) and running, at the end */
  double ttft_max; /* the longest time to first token given this second; NaN when none */
};

/* One second, t: first the pods (a pod not listed is gone; a new Ready one joins the router; a
 * draining one gets nothing new and works off what it has), then the second's arrivals (none
 * when `arrivals` is false: the run settles), routed as they come, then every pod to t + 1.
 * Returns 0 or GS_ENOMEM. */
int sim_serve_second(struct sim_serve *s, int64_t t, const struct sim_serve_pod *pods, size_t n,
                     bool arrivals, struct sim_serve_step *out);
/* Pod id's time averages over the last second (running, waiting, KV %, in flight %, busy as
 * rho); false when the pod does not serve. */
bool sim_serve_load(const struct sim_serve *s, int id, double *running, double *waiting,
                    double *kv_pct, double *inflight_pct, double *busy);
/* Engine signal es of pod id as its agent reads it (src/agent/engine_llm.c), from the pod's last
 * two scrapes (every engineInterval): a latency signal's histogram of the window into *h and its
 * observations into *v, absent when the window holds none while the pod was busy (an idle pod
 * reads 0 observations); waiting prompt tokens (requests waiting x the mean prompt length of the
 * window's finished requests, else since the start); prefill tokens per second over the window.
 * Returns true with the reading, false when absent (or not a pod of this model). */
bool sim_serve_engine(const struct sim_serve *s, int id, enum engine_signal es, double *v,
                      struct latency_hist *h);
/* A latency trigger's window (window_ms > 0) over pod id's scrapes: r, the pod's reading from
 * sim_serve_engine, widened as the agent widens it (core/latwin.h, latwin_apply), the window
 * ending at the pod's last scrape. */
void sim_serve_window(const struct sim_serve *s, int id, int64_t window_ms,
                      struct engine_reading *r);
/* The outcomes so far against the model's SLO. Returns 0 or GS_ENOMEM. */
int sim_serve_summary(const struct sim_serve *s, struct llm_summary *out);

/* The SLO floor: the fewest replicas each minute that meet the SLO's attainment for that minute's
 * requests, replayed on fresh replicas with the same engine model and router (perfect foresight:
 * every replica Ready when its minute starts). Fills per_minute[ceil(n / 60)] with the replica
 * counts, and *reach (when not NULL) with the percentage of all requests that meet the SLO alone
 * on an empty replica: no replica count attains more. Returns 0 or GS_ENOMEM. */
int sim_serve_floor(const struct sim_model *m, const struct sim_trace *tr, uint64_t seed,
                    int *per_minute, double *reach);

#endif
