/* The simulated workload: capacity, GPUs, placement, start-up and drain, and how each signal
 * (GPU fields, engine metrics, CPU) follows load, read from a small YAML file. Signals are
 * data: an engine metric is one more entry in the file, not code. */
#ifndef GS_SIM_MODEL_H
#define GS_SIM_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "core/engine.h"
#include "core/sample.h"
#include "sim/batch.h"
#include "sim/llm.h"

#define SIM_MAX_SIGNALS 24
#define SIM_SIGNAL_NAME 96

enum sim_signal_kind {
  SIM_SIG_LINEAR = 0, /* idle + (full - idle) x load, capped at max */
  SIM_SIG_FLAT,       /* the same value whatever the load, from the pod's start (reserved memory) */
  SIM_SIG_QUEUE,      /* requests waiting per pod: the backlog share plus M/M/1 waiting */
  SIM_SIG_BATCH,      /* a continuous-batching quantity (the model's batching block) x scale */
  SIM_SIG_OBSERVED,   /* what the engine model's pods observe, as their engine serves it: the
                         latency histograms of a scrape window, prompt tokens (engine block) */
};

/* What a batching signal reads (sim/batch.h, per pod). */
enum sim_batch_of { SIM_BATCH_RUNNING = 0, SIM_BATCH_WAITING, SIM_BATCH_KV, SIM_BATCH_INFLIGHT };
#define SIM_BATCH_OFS "running|waiting|kv|inflight"

/* A serving pod's load in one second: rho (offered work over capacity, > 1 is overload) and the
 * requests waiting per pod; with a batching model also running requests, KV usage (%) and
 * requests in flight over maxNumSeqs (%). */
struct sim_load {
  double rho, waiting, running, kv_pct, inflight_pct;
};

struct sim_signal {
  char name[SIM_SIGNAL_NAME]; /* a gpuscale field ("gpu_utilization") or a series name */
  enum sim_signal_kind kind;
  double idle, full, max; /* LINEAR */
  double flat;            /* FLAT */
  bool gpu;               /* a GPU field (per GPU), else a per-pod engine metric */
  enum gpu_field field;   /* when gpu */
  bool cpu;               /* the pod's CPU in percent of its request (the cpu trigger) */
  bool engine;            /* an engine metricType (vllm_queue_depth...): each ready pod's engine
                             reports it to the agent on its node, for engine triggers */
  enum engine_signal esig;
  enum sim_batch_of batch; /* BATCH */
  double scale;            /* BATCH: 0.01 for a 0..1 series (vllm:kv_cache_usage_perc) */
};

enum sim_placement { SIM_PLACE_DEDICATED = 0, SIM_PLACE_TIMESLICE };
/* Which node a new pod goes to: pack fills the lowest node first (a bin-packing scheduler
 * profile, and the default); spread takes the node with the most free GPUs (kube-scheduler's
 * default LeastAllocated scoring). */
enum sim_scheduling { SIM_SCHED_PACK = 0, SIM_SCHED_SPREAD };
enum sim_startup { SIM_START_FIXED = 0, SIM_START_UNIFORM, SIM_START_NORMAL };

struct sim_model {
  char name[96];
  double capacity;      /* work per second one replica (one GPU's worth) serves at full load */
  int gpus_per_replica; /* dedicated placement */
  int gpus_per_node;    /* GPUs per node; a node-scope agent reports its own node's */
  int nodes;            /* GPU nodes in the cluster (0: as many as the pods need) */
  enum sim_scheduling scheduling;
  int agent_node;         /* the node whose agent answers node-scope triggers ... */
  bool agent_round_robin; /* ... or the next node's agent at each read (a headless Service) */
  char gpu_model[96];     /* modelName for the price table ("NVIDIA H100 80GB HBM3") */
  double gpu_memory_mib;
  enum sim_placement placement;
  int slices_per_gpu;     /* timeslice: pods one GPU holds at most */
  int max_gpus;           /* GPUs the cluster can give the workload (0: as many as asked);
                             a pod that finds none stays Pending */
  bool shared_per_pod;    /* count a shared GPU once per holder pod (per-pod copies) */
  enum sim_startup start; /* start-up delay: node, image pull, model load */
  double start_s, start_max_s, start_sd_s;
  double drain_s;               /* a removed pod holds its GPU this long */
  double queue_per_pod;         /* waiting requests a pod holds before new ones are dropped */
  double request_s;             /* seconds one request is in flight when served (HTTP add-on's
                                   concurrency); 0 when the model does not say */
  struct sim_batching batching; /* a continuous-batching server (capacity then derived) */
  struct llm_params llm;        /* the step-time engine model (`engine:`), calibrated */
  bool llm_kv_given;            /* engine.kvCacheTokens written (else a calibration fits it) */
  enum llm_route routing;       /* the router in front of the replicas (engine model) */
  struct llm_slo slo;           /* `slo:` (or --slo): what a request must meet; timeout always */
  double engine_interval_s;     /* engineInterval: the agent's scrape of each engine pod (5 s) */
  bool capacity_derived;        /* capacity not given: from batching at the trace's lengths */
  struct sim_signal sig[SIM_MAX_SIGNALS];
  size_t nsig;
  enum engine_kind engine; /* the engine of the engine signals; ENGINE_UNKNOWN when none */
  /* outages: readings unavailable (stale agents) in [from, to) seconds */
  double outage_from[8], outage_to[8];
  size_t noutages;
};

/* Parses a model file. Returns 0, or GS_EPARSE / GS_EINVAL with err naming file:line, the key,
 * the bad value and what is allowed. */
int sim_model_parse(const char *text, size_t len, const char *file, struct sim_model *out,
                    char *err, size_t errlen);
int sim_model_load(const char *path, struct sim_model *out, char *err, size_t errlen);
/* The signal named name, or NULL. */
const struct sim_signal *sim_model_signal(const struct sim_model *m, const char *name);
/* The engine signal es, or NULL (the pods' engine does not report it). */
const struct sim_signal *sim_model_engine(const struct sim_model *m, enum engine_signal es);
/* The GPU signal for field f, or NULL (the field is absent from the simulated readings). */
const struct sim_signal *sim_model_field(const struct sim_model *m, enum gpu_field f);
/* A signal's value at a pod's load. */
double sim_signal_value(const struct sim_signal *s, const struct sim_load *l);
/* The same at load rho with `waiting` requests per pod and nothing else known. */
double sim_signal_at(const struct sim_signal *s, double rho, double waiting);
/* The mean start-up delay (what the perfect-foresight floor knows in advance). */
double sim_model_mean_start(const struct sim_model *m);
/* True when readings are unavailable at second t. */
bool sim_model_outage(const struct sim_model *m, double t);

#endif
