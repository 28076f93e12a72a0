/* The simulation loop's shared state (struct eng) and what its parts call across files: the
 * workload's pods and load (pods.c), the simulated readings (readings.c), the summary and floor
 * (summary.c), and the KEDA and HPA loop (engine.c). Internal to src/sim. */
#ifndef GS_SIM_ENGINE_INT_H
#define GS_SIM_ENGINE_INT_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "keda/scaler.h"
#include "sim/hpa.h"
#include "sim/engine.h"
#include "sim/keda.h"
#include "sim/serve.h"

#define MAX_GPR 64
#define HIST_S 3600 /* readings kept for a trigger's window */

enum pod_state { POD_STARTING = 0, POD_READY, POD_DRAINING, POD_GONE };

struct pod {
  int id;
  enum pod_state state;
  double ready_at, gone_at;
  int ngpu;
  int gpu[MAX_GPR];
};

struct eng {
  const struct sim_model *m;
  const struct sim_scaledobject *so;
  const struct sim_trace *tr;
  int64_t now;
  double demand, backlog, capacity;
  struct sim_load load;    /* a serving pod's, this second */
  int spec, ready, status; /* scale.spec.replicas, ready pods, non-terminating pods */
  int held;                /* GPUs the pods hold (dedicated placement) */
  struct pod *pods;
  size_t npods, cappods;
  int next_id;
  int *holders; /* pods holding GPU g */
  int *ready_holders;
  size_t ngpus, capgpus;
  uint64_t rng;
  struct sim_load hist[HIST_S]; /* ring by second */
  struct sim_batch batch;       /* the batching model's requests (model batching block) */
  struct sim_wait wait;         /* the request FIFO's delays */
  struct sim_serve *serve;      /* the step-time engine model's requests (model engine block) */
  struct sim_serve_pod *spods;  /* scratch: the pods as the serving model sees them */
  size_t capspods;
  double ttft_now; /* step_serve's longest time to first token this second (NaN: none) */
  double prefill_sum, admitted_sum;
  struct scaler agent, gateway;
  struct scaler_selector selector;
  struct scaler_dual dual;       /* the agent's: GPU values, and its node's engine pods */
  struct engine_reading *ereads; /* scratch: one node's engine pods */
  size_t capereads;
  unsigned char *mark; /* scratch: GPUs seen by a workload selection (capgpus bytes) */
  size_t capmark;
  bool oom; /* an allocation failed where the loop cannot return it (a trigger read, the HPA's
               CPU proposal): the run fails instead of going on with a made-up reading */
  struct sim_params prm;
  struct sim_tol tol; /* the cluster's, or the behavior block's per direction */
  struct sim_hpa hpa;
  struct sim_keda keda;
  struct sim_fallback fb[SIM_MAX_TRIGGERS];
  bool gw[SIM_MAX_TRIGGERS]; /* trigger i is answered by the gateway */
  /* gpuscale trigger i parsed once for its scaler (scaler_parse_trigger): the policy answers it
   * every simulated second, and parsing each time would cost more than the whole loop */
  struct trigger parsed[SIM_MAX_TRIGGERS];
  bool has_parsed[SIM_MAX_TRIGGERS];
  double target[SIM_MAX_TRIGGERS];  /* the metric target KEDA gives the HPA */
  int push_state[SIM_MAX_TRIGGERS]; /* -1 unknown, 0 inactive, 1 active */
  /* this second's answer per trigger: KEDA's poll, the HPA's query and a push check in the same
   * second read the same simulated state, so they get the same answer */
  int64_t cached_at[SIM_MAX_TRIGGERS];
  /* ... and across seconds for a gpuscale trigger without a window, while nothing it reads has
   * changed: the pods on GPUs (version), the load and the outage state. */
  uint64_t version, cached_version[SIM_MAX_TRIGGERS];
  struct sim_load cached_load[SIM_MAX_TRIGGERS];
  bool cached_outage[SIM_MAX_TRIGGERS], cacheable[SIM_MAX_TRIGGERS];
  size_t rr; /* agentNode round-robin: reads so far */
  int cached_rc[SIM_MAX_TRIGGERS];
  double cached_value[SIM_MAX_TRIGGERS];
  bool cached_active[SIM_MAX_TRIGGERS];
  /* KEDA's metrics cache (useCachedMetrics): the record of trigger i from the last poll, its
   * metric after fallback and its error, which the HPA's reads take instead of the scaler.
   * Every poll replaces the records (StoreRecords); an error does not drop them (KEDA main, its
   * #8073). */
  bool rec_has[SIM_MAX_TRIGGERS];
  int rec_rc[SIM_MAX_TRIGGERS];
  double rec_m[SIM_MAX_TRIGGERS];
  bool polling; /* inside keda_poll: reads store records */
  /* prometheus trigger i: the value Prometheus holds from its last scrape, and when that was */
  bool prom_has[SIM_MAX_TRIGGERS];
  int64_t prom_at[SIM_MAX_TRIGGERS];
  double prom_val[SIM_MAX_TRIGGERS];
  int events;
};

/* Adds a pod (Ready at once when ready_now, else starting); 0 or GS_ENOMEM. */
int eng_add_pod(struct eng *e, bool ready_now);
/* Start-ups finish, drains end, and the Deployment follows spec; 0 or GS_ENOMEM. */
int eng_step_pods(struct eng *e);
/* One second of load through the model: what was served and dropped. */
void eng_step_load(struct eng *e, double *served, double *dropped);
/* GPU g's value of signal s, with `serving` the serving value. */
double eng_gpu_value(const struct eng *e, size_t g, const struct sim_signal *s, double serving);
/* The scaler's GPU source for an agent (node scope). */
int eng_agent_values(void *ud, const struct trigger *t, double *vals, size_t cap, size_t *n,
                     char *err, size_t errlen);
/* The scaler's wait for new readings: never waits (simulated time). */
uint64_t eng_no_wait(void *ud, uint64_t seen, int timeout_ms);
/* Pod p's name: <model name>-<id>. */
void eng_pod_name(const struct eng *e, const struct pod *p, char *out, size_t len);
/* The scaler's engine source for an agent: its node's engine pods. */
int eng_agent_engines(void *ud, const struct trigger *t, struct scaler_selection *sel, char *err,
                      size_t errlen);
/* The scaler's selection for the gateway (cluster, workload and node scope). */
int eng_gw_select(void *ud, const struct trigger *t, struct scaler_selection *sel, char *err,
                  size_t errlen);
/* Fills r->sum from the run: GPU-hours, the floor, latency. 0 or GS_ENOMEM. */
int eng_summarize(const struct eng *e, struct sim_result *r);

#endif
