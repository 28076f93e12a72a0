/* Scaling profiles: the four seed profiles plus user profiles from a YAML file. */
#ifndef GS_PROFILE_H
#define GS_PROFILE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/aggregate.h"
#include "core/engine.h"
#include "core/sample.h"

struct profile {
  char name[64];
  enum gpu_field metric;
  double target;     /* > 0 */
  double activation; /* >= 0; active means value > activation */
  enum aggregation agg;
  bool engine;                /* an engine profile: esignal, not metric (docs/engines.md) */
  enum engine_signal esignal; /* when engine */
};

struct profile_set {
  struct profile *items;
  size_t n;
  /* The operator's --allow-engine-endpoints (agent): when set, a trigger's vllmEndpoint /
   * tritonEndpoint is accepted if this check passes (0; else it writes why into err). NULL:
   * every URL in trigger metadata is refused. profile_set_init sets it NULL. */
  int (*endpoint_check)(const char *url, char *err, size_t errlen);
  /* Non-NULL when the set can be replaced while scalers read it (the agent's SIGHUP reload of
   * --profiles): a scaler holds it for reading around each parse and its trigger-cache lookup;
   * the reload holds it for writing while it swaps the items and clears the cache.
   * profile_set_init sets it NULL. */
  pthread_rwlock_t *lock;
};

/* Fills the set with the built-in profiles: the GPU ones (vllm-inference, triton-inference,
 * training, batch, ollama, tgi-inference, distributed-training) and the engine ones
 * (vllm-queue-depth, vllm-kv-cache, triton-queue-wait, triton-request-rate, tgi-queue-size,
 * sglang-queue-depth, vllm-in-flight, tgi-in-flight, sglang-in-flight; docs/profiles.md). Returns 0
 * or GS_ENOMEM. */
int profile_set_init(struct profile_set *ps);
/* Adds or replaces profiles from a YAML file of the form
 *   profiles:
 *     NAME: {metric: gpu_utilization, target: 60, activation: 5, aggregation: avg}
 * Returns 0, or GS_EPARSE/GS_EINVAL with "file:line: key: what is allowed" in err (set unchanged).
 */
int profile_set_load(struct profile_set *ps, const char *path, char *err, size_t errlen);
const struct profile *profile_find(const struct profile_set *ps, const char *name);
/* "vllm-inference, triton-inference, ..." for error messages, into buf. */
void profile_names(const struct profile_set *ps, char *buf, size_t len);
void profile_set_free(struct profile_set *ps);

#endif
