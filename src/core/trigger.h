/* Trigger metadata (KEDA's scalerMetadata map) parsed into a validated trigger. */
#ifndef GS_TRIGGER_H
#define GS_TRIGGER_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/aggregate.h"
#include "core/engine.h"
#include "core/profile.h"
#include "core/sample.h"

#define TRIGGER_MAX_INDICES 64
#define TRIGGER_NAME_LEN 128
#define TRIGGER_REGEX_MAX 256 /* longest pods/nodes/gpuModel pattern accepted */
/* Most item copies a pattern may compile to (glibc spells repetitions out: ~4 MB at the cap) */
#define TRIGGER_REGEX_COPIES 4096
#define TRIGGER_NS_LEN 64
#define TRIGGER_NODE_LEN 254
#define TRIGGER_DEFAULT_TARGET 80.0 /* targetValue without a profile (keda-gpu-scaler's) */
#define TRIGGER_URL_LEN 512         /* longest vllmEndpoint / tritonEndpoint accepted */
/* The GPU metricTypes, for messages (trigger_scaler_metric says which fields they are). */
#define TRIGGER_SCALER_METRICS                                                                     \
  "gpu_utilization, memory_utilization, memory_used_percent, memory_used_mib, temperature, "       \
  "power_draw, sm_active, sm_occupancy, tensor_active, dram_active, gr_engine_active, "            \
  "pcie_tx_kbps, pcie_rx_kbps, nvlink_tx_mbps, nvlink_rx_mbps"

/* Which GPUs one value stands for. AUTO (no scope key, no pods key) is resolved by the policy:
 * node at the agent, cluster at the gateway. */
enum trigger_scope {
  TRIGGER_SCOPE_AUTO = 0,
  TRIGGER_SCOPE_NODE,
  TRIGGER_SCOPE_CLUSTER,
  TRIGGER_SCOPE_WORKLOAD,
};

/* Workload scope: how per-pod values combine. SUM suits AverageValue, AVERAGE suits Value. */
enum trigger_value { TRIGGER_VALUE_SUM = 0, TRIGGER_VALUE_AVERAGE };

/* A compiled selector regex; matches only the whole string (POSIX ERE). */
struct trigger_regex {
  bool set;
  regex_t re;
  char src[TRIGGER_REGEX_MAX + 1]; /* the pattern as given (what a selection's key names) */
};

struct kv {
  const char *key;
  const char *value;
};

struct trigger {
  char profile[64]; /* empty when no profile was given */
  enum gpu_field metric;
  double target;     /* > 0, finite */
  double activation; /* >= 0, finite */
  enum aggregation agg;
  size_t n_indices; /* 0 = every GPU */
  int indices[TRIGGER_MAX_INDICES];
  int64_t window_ms; /* 0 = newest sample only */
  char metric_name[TRIGGER_NAME_LEN];
  int poll_interval_s; /* pollIntervalSeconds as given, 0 when absent; changes no timing */
  /* Gateway keys (selectors, scope, partial failure). The regexes own memory: trigger_free. */
  enum trigger_scope scope;
  enum trigger_value value;
  char ns[TRIGGER_NS_LEN];     /* namespace selector; empty = any */
  char node[TRIGGER_NODE_LEN]; /* scope node at the gateway: the one node; empty = unset */
  struct trigger_regex pods, nodes, gpu_model;
  bool allow_partial;  /* allowPartial: aggregate whatever is fresh */
  double min_coverage; /* minCoverage in (0,1]; 1 (the default) = every selected GPU fresh */
  bool has_min_coverage;
  bool gateway_keys; /* node, nodes or gpuModel was given: only the gateway can honour them */
  /* Engine metrics (issue 12, docs/engines.md): metricType is an engine signal, read per engine
   * pod; metric is then unused. Without an aggregation key they aggregate with sum. */
  bool engine;
  enum engine_signal esignal;
  /* vllmEndpoint / tritonEndpoint: set only when the operator allowed URLs (profile_set's
   * endpoint_check) and the check passed; "" otherwise. endpoint_key names the key given. */
  char endpoint[TRIGGER_URL_LEN];
  const char *endpoint_key;
  /* model / modelVersion (Triton metricTypes only): the one model of each pod whose signal is
   * read, and optionally its version; "" = the pod's own combination (docs/engines.md). */
  char model[ENGINE_MODEL_NAME_LEN];
  char model_version[ENGINE_MODEL_VERSION_LEN];
  /* maxNumSeqs: the requests one engine pod runs at once (vLLM --max-num-seqs, TGI
   * --max-batch-size); needed by, and only allowed with, the in-flight metricTypes */
  double max_num_seqs;
  /* quantile: the latency metricTypes' quantile, in (0, 1); LATENCY_DEFAULT_QUANTILE when not
   * given; 0 for any other metricType (the key is refused there) */
  double quantile;
  /* minPrefillTokensPerSecond: the expected-queue-wait metricTypes' floor on each pod's measured
   * prefill throughput, tokens/s (> 0); 0 when not given (the key is refused elsewhere) */
  double prefill_floor;
};

/* True when GPU field f can be a trigger's metricType (or a profile's metric). */
bool trigger_scaler_metric(enum gpu_field f);
/* Parses metadata. Keys: profile, metricType (a GPU field or an engine signal), targetValue,
 * activationThreshold, aggregation, gpuIndex, window, metricName; keda-gpu-scaler's
 * targetGpuUtilization, targetMemoryUtilization, pollIntervalSeconds, and vllmEndpoint /
 * tritonEndpoint (refused with how to annotate the pods instead, unless ps->endpoint_check is
 * set: the operator's --allow-engine-endpoints; the URL must then pass it); and the gateway's
 * scope, namespace, pods, nodes, gpuModel, node, value, allowPartial, minCoverage; the Triton keys
 * model and modelVersion (refused with any other metricType); quantile (latency metricTypes only,
 * in (0, 1), default 0.95); minPrefillTokensPerSecond (expected-queue-wait metricTypes only, > 0);
 * all others are
 * ignored. Without a profile the defaults are keda-gpu-scaler's: gpu_utilization, target 80,
 * activation 0, max, every GPU, so empty metadata is a valid trigger. Returns 0, or GS_EINVAL with
 * a message naming the key, the bad value and what is allowed in err (GS_ENOMEM when a regex
 * could not be compiled for lack of memory). On success *out may own
 * compiled regexes: release them with trigger_free (on failure nothing is owned). Same as
 * trigger_parse_ref with ref_ns NULL. */
int trigger_parse(const struct kv *md, size_t n, const struct profile_set *ps, struct trigger *out,
                  char *err, size_t errlen);
/* As trigger_parse; ref_ns is the ScaledObjectRef's namespace, the default namespace selector in
 * workload scope (NULL or empty: any namespace). */
int trigger_parse_ref(const struct kv *md, size_t n, const struct profile_set *ps,
                      const char *ref_ns, struct trigger *out, char *err, size_t errlen);
/* Frees the compiled regexes of a parsed trigger (a struct copy shares them: free one copy).
 * NULL, a zeroed trigger and a second call are fine. */
void trigger_free(struct trigger *t);
/* True when s matches the whole of r, or r is unset. */
bool trigger_regex_match(const struct trigger_regex *r, const char *s);
/* "auto", "node", "cluster", "workload". */
const char *trigger_scope_name(enum trigger_scope s);
/* True for a metric that does not fall when replicas are added (GPU memory used, % or MiB:
 * reserved at start by LLM servers), DESIGN.md "Load-insensitive metrics". */
bool trigger_flat_metric(enum gpu_field metric);
/* When metric is such a metric and scope is workload: writes a one-line warning (what goes
 * wrong and what to use instead) into buf and returns true; else false, buf untouched. */
bool trigger_workload_warning(enum gpu_field metric, enum trigger_scope scope, char *buf,
                              size_t len);
/* The metricType a trigger reads: the engine signal's name or the GPU field's (static). */
const char *trigger_metric_label(const struct trigger *t);
/* True when the trigger selects GPUs by the pods holding them (namespace or pods, or workload
 * scope): nodes without pod attribution cannot answer it. */
bool trigger_selects_pods(const struct trigger *t);

#endif
