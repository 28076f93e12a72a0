/* The agent's engine-pod source for engine triggers in node scope: a scaler_selector over the
 * engine pods of this node (engines_copy), or over one URL named in a trigger when the operator
 * allowed it (engines_scrape_url). Plugged in beside the GPU source with scaler_source_dual. */
#ifndef GS_AGENT_ENGINE_SOURCE_H
#define GS_AGENT_ENGINE_SOURCE_H

#include "agent/engines.h"
#include "keda/scaler.h"

#define ENGINE_SOURCE_WHY_LEN 256

struct engine_source {
  struct engines *engines;         /* NULL: engine metrics off (why says why) */
  char node[256];                  /* this node's name, for messages ("" = "this node") */
  char why[ENGINE_SOURCE_WHY_LEN]; /* why engines is NULL; "" when it is not */
};

/* A selector (node scope) over es, which must outlive it and not move. An engine trigger is
 * answered UNAVAILABLE with the reason when engine metrics are off; a trigger with an endpoint
 * reads that one URL; otherwise every engine pod of the node counts, selected by namespace and
 * pods, with the partial-answer rules applied by the policy. Everything known and no selected
 * engine pod (at zero replicas) is the one true 0 (docs/engines.md, "Zero to one"). */
struct scaler_selector engine_source_selector(struct engine_source *es);

#endif
