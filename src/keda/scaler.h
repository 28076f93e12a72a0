/* The scaler policy: metadata -> trigger -> value and activity. Plain structs, no gRPC.
 * One policy serves the agent (samples from the local history) and the gateway (cluster view). */
#ifndef GS_SCALER_H
#define GS_SCALER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/latency.h"
#include "core/profile.h"
#include "core/trigger.h"

/* Scopes a source serves (scaler_source.scopes). */
#define SCALER_SCOPE_NODE (1u << 0)
#define SCALER_SCOPE_CLUSTER (1u << 1)
#define SCALER_SCOPE_WORKLOAD (1u << 2)
#define SCALER_SCOPES_GATEWAY (SCALER_SCOPE_NODE | SCALER_SCOPE_CLUSTER | SCALER_SCOPE_WORKLOAD)

#define SCALER_SEL_MAX_VALUES 65536 /* values one selection may hold (GPU x pod pairs) */
#define SCALER_MSG_LEN 2048         /* error messages, whole: the gRPC status details carry them */
#define SCALER_MISSING_LEN 1536     /* the list of what is missing inside one message */
#define SCALER_NOT_SERVING_LEN 384  /* the list of engine pods that do not serve */

/* What a selecting source (the gateway's) found for a trigger. The source only selects and
 * counts; the policy does all the arithmetic and decides about partial failure. */
struct scaler_selection {
  double *vals;    /* n values: one per fresh selected GPU, or per (pod, GPU) in workload scope */
  uint32_t *group; /* workload scope: the pod (0..n_groups-1) vals[i] belongs to; else 0 */
  double *share;   /* workload scope: that pod's share of the GPU of vals[i] (1: held alone) */
  size_t n, cap;   /* grown by scaler_selection_add, freed by scaler_selection_release */
  size_t n_groups; /* workload scope: pods found holding selected GPUs */
  size_t matched;  /* GPUs matching the selectors, fresh or not */
  size_t selected; /* matched GPUs that count: lost GPUs and unsupported fields are left out */
  size_t fresh;    /* selected GPUs with a fresh reading from a fresh agent */
  size_t unknown;  /* what should have been counted and cannot be seen: agents that never
                      reported, nodes without pod attribution for a pod selection, or "no
                      agent has a fresh view at all" */
  /* The coverage denominator's share for the unknown: a node without attribution counts its GPUs
   * that the selection could take, an agent that never reported counts 1. The policy counts at
   * least 1 per unknown. */
  size_t unknown_gpus;
  /* What is stale, disconnected or unknown, by node, with ages; missing_cut counts the notes
   * left out because it was full. */
  char missing[SCALER_MISSING_LEN];
  size_t missing_cut;
  /* Engine triggers: matched pods of the trigger's engine that do not serve (not Ready,
   * terminating: enum engine_pod_state). They get no Service traffic, so they carry none of the
   * workload's load: left out of selected, never missing. Noted in not_serving_notes ("; "-
   * separated, cut when full). LeaderWorkerSet workers are not counted at all: their group is
   * one replica, read through its leader. */
  size_t not_serving;
  char not_serving_notes[SCALER_NOT_SERVING_LEN];
  /* Latency triggers (engine_signal_latency >= 0): the fresh pods' window histograms summed
   * (core/latency.h); the policy reads the trigger's quantile from it. lat_err says why pods could
   * not be summed (their buckets differ): the answer is then UNAVAILABLE. */
  struct latency_hist lat;
  struct latency_hist lat2; /* the addend's (engine_signal_latency_addend), summed likewise */
  char lat_err[160];
  /* Expected-queue-wait triggers: the fresh pods' waiting prompt tokens, and their prefill
   * throughputs (each at least the trigger's minPrefillTokensPerSecond), summed. */
  double qw_tokens, qw_rate;
};

/* Appends one value (of pod `group`, share 1). Returns 0, GS_ENOMEM, or GS_ETOOBIG past
 * SCALER_SEL_MAX_VALUES. */
int scaler_selection_add(struct scaler_selection *sel, double v, uint32_t group);
/* The same for a GPU that several pods hold: pod `group` counts v * share of it in workload
 * scope (share in [0, 1]; the shares of one GPU's pods sum to at most 1). */
int scaler_selection_add_share(struct scaler_selection *sel, double v, uint32_t group,
                               double share);
/* Appends a "; "-separated note to sel->missing; a note that no longer fits is counted in
 * missing_cut (messages end the list with "... and N more"). */
void scaler_selection_note(struct scaler_selection *sel, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Frees vals, group and share; the struct may be reused after zeroing. NULL is fine. */
void scaler_selection_release(struct scaler_selection *sel);

/* Engine triggers (t->engine): adds one node's engine pods rs[0..n) to sel. A pod matches by
 * t->ns and t->pods; one of another engine is matched and left out (as a GPU that does not report
 * a field); one of ENGINE_UNKNOWN (a prometheus.io pod whose engine was never detected) is no
 * engine pod at all: neither matched nor missing (docs/engines.md). A pod that does not serve
 * (not Ready, terminating) is matched, counted in not_serving with its reason, and neither
 * selected nor missing (with node_fresh false it counts stale, as any other); a LeaderWorkerSet
 * worker is skipped (its leader is the replica). A selected pod counts fresh with its value when
 * node_fresh, its reading is fresh and it has the signal (with t->model: the named model's,
 * engine_model_value; a pod that does not serve the model is missing, never 0); else it is
 * missing and noted with its reason (node names the node). With node_fresh false every selected
 * pod is counted into *stale instead, for the caller's note. Workload scope: one group per pod,
 * from *next_group. A latency signal's pods also add their window histograms into sel->lat (a pod
 * whose buckets differ from the others' sets sel->lat_err). Returns 0, GS_ENOMEM or GS_ETOOBIG. */
int scaler_select_engines(const struct trigger *t, const struct engine_reading *rs, size_t n,
                          bool node_fresh, const char *node, struct scaler_selection *sel,
                          uint32_t *next_group, size_t *stale);

/* Where per-GPU values come from. The agent's source reads struct history and serves node scope
 * only. A selecting source (the gateway's) is built with scaler_source_from_selector. */
struct scaler_source {
  /* Fills vals with one value per selected GPU for t (honouring t->indices and t->window_ms).
   * Returns 0 with *n >= 1; GS_ENOTFOUND for an index that does not exist; GS_EUNAVAIL when a
   * selected GPU has no fresh reading. err gets the reason. rc 0 with *n == 0 breaks this
   * contract and is answered UNAVAILABLE (the agent's source never does it). */
  int (*values)(void *ud, const struct trigger *t, double *vals, size_t cap, size_t *n, char *err,
                size_t errlen);
  /* Blocks until the next sampling pass after `seen`, or timeout_ms; returns the new generation. */
  uint64_t (*wait_tick)(void *ud, uint64_t seen, int timeout_ms);
  void *ud;
};

/* A source that selects across nodes and reports coverage (the gateway's cluster view). */
struct scaler_selector {
  unsigned scopes; /* SCALER_SCOPE_* bits served */
  /* t->scope is resolved (never AUTO). Fills sel (zeroed by the caller, who releases it) and
   * returns 0; staleness is reported in the counts, not as an error. rc 0 with matched == 0 and
   * unknown == 0 means "everything is known and nothing matches": the policy answers value 0,
   * inactive and sets empty_selection. So whatever the source cannot see (an agent that never
   * reported, a node without pod attribution, no fresh agent at all) must be counted in
   * unknown. With no fresh value at all the policy answers UNAVAILABLE, whatever allowPartial
   * and minCoverage say. Errors: GS_ENOTFOUND (named node or gpuIndex absent), GS_ENOMEM,
   * GS_ETOOBIG, with err filled. */
  int (*select)(void *ud, const struct trigger *t, struct scaler_selection *sel, char *err,
                size_t errlen);
  uint64_t (*wait_tick)(void *ud, uint64_t seen, int timeout_ms);
  void *ud;
};

/* Wraps sel (which must outlive the result) as a scaler_source. The policy recognises it and uses
 * select, scopes and coverage; any other source serves node scope only, and the policy refuses
 * scope cluster/workload and the gateway selectors for it with INVALID_ARGUMENT. Calling
 * values() on the wrapper directly returns the flattened selection (for tools and tests).
 * (A wrapper rather than new scaler_source fields, so that the positional initialisers
 * {values, wait_tick, ud} used across the tree stay warning-free.) */
struct scaler_source scaler_source_from_selector(struct scaler_selector *sel);

/* The agent's source: GPU triggers from gpus (values, node scope, errors decided there), engine
 * triggers from engines (a selector whose scopes are SCALER_SCOPE_NODE: its engine pods), judged
 * with the partial-answer rules as at the gateway (docs/engines.md). The policy still treats the
 * source as node-scope only. */
struct scaler_dual {
  struct scaler_source gpus;
  struct scaler_selector engines;
};
/* Wraps d (which must outlive the result and not move). wait_tick is the GPU source's. */
struct scaler_source scaler_source_dual(struct scaler_dual *d);

struct scaler_request {
  const char *name;    /* ScaledObject name */
  const char *ns;      /* ScaledObject namespace */
  const struct kv *md; /* scalerMetadata, verbatim */
  size_t nmd;
};

struct scaler_error {
  int code; /* GS_EINVAL, GS_ENOTFOUND, GS_EUNAVAIL ... */
  char msg[SCALER_MSG_LEN];
  /* Set when the error is a coverage failure (stale, disconnected or unknown agents, or nothing
   * fresh at all), for metrics and logs. */
  bool has_coverage;
  size_t selected, fresh, unknown;
  double coverage;
};

struct scaler_spec {
  char metric_name[TRIGGER_NAME_LEN];
  double target;
};

struct scaler_result {
  char metric_name[TRIGGER_NAME_LEN];
  double value;
  double activation;
  bool active;              /* value > activation */
  enum trigger_scope scope; /* as resolved for this source */
  /* Nothing matches the selection (no pod holds a GPU): the one case where value 0 is a true
   * reading rather than an error. The transport should log it. */
  bool empty_selection;
  size_t selected, fresh; /* GPUs selected and fresh among them */
  size_t unknown;         /* agents/nodes that could not be seen (scaler_selection.unknown) */
  double coverage;        /* fresh / (selected + the unknown's share); 1 when complete or empty */
  bool partial;           /* aggregated over less than the whole selection (allowPartial) */
  size_t pods;            /* workload scope: pods that contributed a value */
  size_t not_serving;     /* engine pods left out as not serving (scaler_selection.not_serving) */
};

struct trigger_cache;

struct scaler {
  const struct profile_set *profiles;
  struct scaler_source src;
  /* Parsed triggers by metadata (keda/trigger_cache.h), so that repeated polls skip the parse
   * and the regex compilation; NULL parses every call. Owned by whoever set it up; it must be
   * cleared (trigger_cache_clear) when profiles change. */
  struct trigger_cache *cache;
};

/* Each returns 0, or a GS_E* code with e filled. They never block on I/O. r->ns is the default
 * namespace selector of workload scope. */
int scaler_get_spec(const struct scaler *s, const struct scaler_request *r, struct scaler_spec *out,
                    struct scaler_error *e);
/* metric_name is what KEDA sends in GetMetricsRequest; it must be the trigger's metric name
 * (or empty). A different name is GS_ENOTFOUND. */
int scaler_get_metrics(const struct scaler *s, const struct scaler_request *r,
                       const char *metric_name, struct scaler_result *out, struct scaler_error *e);
int scaler_is_active(const struct scaler *s, const struct scaler_request *r, bool *active,
                     struct scaler_error *e);
/* A StreamIsActive stream's hold on its parsed trigger: a stream asks about the same metadata at
 * every pass, so it keeps the trigger cache's entry between calls rather than looking it up
 * (hashing the metadata, copying the trigger) each time. Zero-initialise it; release it once. */
struct scaler_hold {
  struct trigger_cache_entry *e;
};
/* scaler_is_active through h: the same answers. */
int scaler_is_active_held(const struct scaler *s, const struct scaler_request *r,
                          struct scaler_hold *h, bool *active, struct scaler_error *e);
void scaler_hold_release(const struct scaler *s, struct scaler_hold *h);
/* For a caller that asks about one trigger many times (gpuscale simulate, every simulated
 * second): scaler_parse_trigger parses r's metadata and resolves it for this scaler once (0, or
 * the error scaler_get_metrics would give; on success the caller owns *t and trigger_frees it);
 * scaler_eval_trigger then answers as scaler_get_metrics does, without parsing again. */
int scaler_parse_trigger(const struct scaler *s, const struct scaler_request *r, struct trigger *t,
                         struct scaler_error *e);
int scaler_eval_trigger(const struct scaler *s, const struct trigger *t, struct scaler_result *out,
                        struct scaler_error *e);

/* MIG (DESIGN.md "MIG"): a MIG-enabled GPU's parent reports whole-card memory, which already holds
 * its instances'. True for the fields a MIG instance reports as well (utilisation, memory, the GPM
 * profiling metrics): for them a selection that lists a parent's instances leaves the parent out.
 * The card-level fields (temperature, power, energy, clocks, PCIe, NVLink, XID, remapped rows...)
 * are read on the parent only, so it keeps counting for those. A gpuIndex naming the parent is the
 * user's explicit choice and is never left out. */
static inline bool scaler_mig_instance_field(enum gpu_field f) {
  switch (f) {
  case GF_GPU_UTIL:
  case GF_MEM_UTIL:
  case GF_MEM_USED_MIB:
  case GF_MEM_FREE_MIB:
  case GF_MEM_TOTAL_MIB:
  case GF_MEM_USED_PCT:
  case GF_MEM_RESERVED_MIB:
  case GF_GR_ENGINE_ACTIVE:
  case GF_SM_ACTIVE:
  case GF_SM_OCCUPANCY:
  case GF_TENSOR_ACTIVE:
  case GF_DRAM_ACTIVE:
  case GF_PROF_PCIE_TX_BPS:
  case GF_PROF_PCIE_RX_BPS: return true;
  default: return false;
  }
}

#endif
