/* The gateway's latency windows (docs/engines.md "The window"), internal to src/gateway/: per
 * agent, one core/latwin.h ring per engine pod it lists, fed with each scrape the agent sends,
 * so that a latency trigger with `window` sums the scrapes within it as the agent would. Kept only
 * once a windowed latency trigger has asked (cluster_keep_latency), as GPU rings keep only the
 * fields windows read. */
#ifndef GS_GATEWAY_LATWINS_H
#define GS_GATEWAY_LATWINS_H

#include <stddef.h>

#include "core/latwin.h"

struct gw_latwin {
  char ns[ENGINE_NS_LEN];
  char pod[ENGINE_POD_LEN];
  struct latwin w;
};

/* One agent's: e[i] belongs to its engine pod i (the order of its last update). */
struct gw_latwins {
  size_t n;
  struct gw_latwin *e;
};

void latwins_free(struct gw_latwins *l);

/* Lays l out for the agent's engine pods rs[0..n) (a pod still listed keeps its ring, one that
 * left loses it) and records each pod's scrape (latwin_push). Returns 0, or GS_ENOMEM (l is
 * then as before, or empty: windows restart). */
int latwins_update(struct gw_latwins *l, const struct engine_reading *rs, size_t n);

/* Pod i's ring, or NULL when none is kept (l NULL, or not laid out for these pods). */
const struct latwin *latwins_at(const struct gw_latwins *l, size_t i,
                                const struct engine_reading *r);

#endif
