/* Shared answers at the gateway (docs/gateway.md, "Sizing"): a trigger's stamp for the trigger
 * cache (keda/trigger_cache.h), so that the open streams and polls of one trigger share one
 * evaluation per change of what its selection reads, and a trigger whose inputs did not change
 * is not evaluated again. */
#ifndef GS_GATEWAY_SHARE_H
#define GS_GATEWAY_SHARE_H

#include <stdint.h>

#include "core/trigger.h"

/* The stamp function (ud: the struct cluster). Node scope: the named node's last change (or any
 * change every selection sees); cluster and workload scope: the view's last change. A windowed
 * trigger gets 0 (evaluate every time) while its window may still hold a sample from before the
 * last change, or when the window is shorter than three agent intervals plus a second (it may
 * hold no sample at all between two). */
uint64_t gwshare_stamp(void *cluster, const struct trigger *t);

#endif
