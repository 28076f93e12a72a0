/* The agent's HTTP endpoints: /healthz, /readyz and the /api/v1/gpus JSON snapshot. */
#ifndef GS_API_H
#define GS_API_H

#include <stddef.h>

#include "agent/sampler.h"
#include "agent/engines.h"
#include "core/attrib.h"
#include "http/server.h"

struct agent_api {
  struct sampler *sampler;
  struct history *hist;
  const char *node_name;
  const char *collector_name;
  const char *driver_version; /* may be NULL */
  int64_t interval_ms;
  struct attrib *pods;     /* pod attribution table; may be NULL */
  struct engines *engines; /* engine pods (/api/v1/engines); may be NULL */
};

/* Fills routes (at least 4 entries: /healthz, /readyz, /api/v1/gpus, /api/v1/engines) with the
 * agent's endpoints; returns how many. */
size_t agent_api_routes(struct agent_api *api, struct http_route *routes, size_t cap);
/* True when the sampler passed within 3 intervals (+5 s slack): the liveness test. */
bool agent_api_live(const struct agent_api *api);
/* True when at least one GPU has a fresh good sample: readiness and gRPC health. */
bool agent_api_ready(const struct agent_api *api);

#endif
