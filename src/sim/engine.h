/* The simulation: a demand trace through pods of the workload model, KEDA's loop and the HPA,
 * one simulated second at a time. gpuscale triggers are answered by the real scaler policy
 * (keda/scaler.h) over simulated GPU readings, in node scope (an agent) or through a selector
 * (the gateway: cluster, workload and node scope). */
#ifndef GS_SIM_ENGINE_H
#define GS_SIM_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/profile.h"
#include "sim/llm.h"
#include "sim/model.h"
#include "sim/scaledobject.h"
#include "sim/trace.h"

struct sim_summary {
  double arrived, served, dropped; /* work units */
  double served_share;             /* served / arrived; 1 when nothing arrived */
  double over_capacity_s;          /* seconds with demand above ready capacity */
  double gpu_hours, floor_gpu_hours;
  double ratio; /* gpu_hours / floor_gpu_hours; NaN when the floor is 0 */
  int scale_events, max_replicas, min_replicas;
  bool has_step;             /* the trace has a step (a rise of >= 30 % of peak in 60 s) */
  double step_at_s, react_s; /* when it came, and until capacity covered demand (-1: never) */
  double wall_s, sim_s;      /* wall-clock seconds and simulated seconds (the trace's) */
  double settle_s;           /* seconds run after the trace while requests waited (SIM_SETTLE_S) */
  /* latency: the 95th percentile of the requests' queueing delay (FIFO, 1 s resolution), and
   * with a batching model of their time to first token (delay + the mean prefill time) */
  double p95_wait_s, p95_ttft_s; /* p95_ttft_s NaN without a batching model */
  /* with the step-time engine model: every request's outcome (TTFT, TPOT, end to end, the
   * SLO's attainment, abandoned), and with an SLO the floor is the SLO floor (sim_serve_floor) */
  double replica_capacity; /* requests (work units) per second one replica serves */
  bool capacity_derived;   /* ... derived from the engine or batching model's lengths */
  bool has_requests;
  struct llm_summary req;
  bool slo_set;
  struct llm_slo slo;
  double slo_reach; /* with an SLO: the % of requests that meet it alone on an empty replica */
};

struct sim_result {
  size_t n;       /* seconds */
  double *demand; /* the trace's values (not owned) */
  float *capacity, *served, *backlog, *replicas, *ready, *gpus, *floor;
  float *ttft; /* the engine model's longest time to first token given each second (NaN: none);
                  NULL without an engine block */
  /* the triggers, then "composite-metric" when scalingModifiers are set */
  size_t ntrig;
  char trig_name[SIM_MAX_TRIGGERS + 1][64];
  float *value[SIM_MAX_TRIGGERS + 1];   /* the value last read for trigger i (NaN: error, unread) */
  int8_t *active[SIM_MAX_TRIGGERS + 1]; /* 1 / 0, -1 when unknown */
  /* what the policy warns about trigger i (trigger_workload_warning), "" when nothing */
  char warning[SIM_MAX_TRIGGERS + 1][640];
  struct sim_summary sum;
};

/* After the trace, the run goes on without arrivals or scaling while requests wait, for at most
 * this many seconds; what still waits then counts as not served. */
#define SIM_SETTLE_S 600

/* Settings of the cluster rather than of the ScaledObject. */
struct sim_params {
  uint64_t seed;     /* trace noise and start-up delays */
  int hpa_sync_s;    /* --horizontal-pod-autoscaler-sync-period (15) */
  double tolerance;  /* --horizontal-pod-autoscaler-tolerance (0.1) */
  int down_window_s; /* --horizontal-pod-autoscaler-downscale-stabilization (300) */
  int scrape_s;      /* Prometheus' scrape interval for prometheus triggers (0: read live) */
};
/* The Kubernetes defaults, with seed 1. */
struct sim_params sim_params_default(void);

/* Progress: fraction done in [0, 1]; called about every 1 %. */
typedef void (*sim_progress_fn)(void *ud, double done);

/* Runs one configuration over the trace. Returns 0 with *out filled (release with
 * sim_result_free), or a GS_E* code with err filled (a trigger the policy refuses, say). */
int sim_run(const struct sim_model *m, const struct sim_scaledobject *so,
            const struct sim_trace *tr, const struct profile_set *ps, const struct sim_params *prm,
            sim_progress_fn progress, void *pud, struct sim_result *out, char *err, size_t errlen);
void sim_result_free(struct sim_result *r);
/* Frees the per-second series and keeps the summary, names and warnings (what --compare prints),
 * so that many runs do not hold many timelines. */
void sim_result_drop_series(struct sim_result *r);

/* The perfect-foresight floor: GPUs held at each second by the fewest replicas that cover the
 * demand, started start_s ahead (bridging a gap shorter than a start-up instead of restarting).
 * A replica's capacity is cap[t] when cap is not NULL, else the model's. Fills floor_gpus[n]
 * when not NULL and returns the GPU-hours; NaN when out of memory (floor_gpus then unfilled). */
double sim_floor(const double *demand, const double *cap, size_t n, const struct sim_model *m,
                 double start_s, float *floor_gpus);

#endif
