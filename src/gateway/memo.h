/* Per-agent parts of plain cluster selections (docs/gateway.md, "Sizing"): a cluster-scope
 * trigger with no pod, node or model selector, no window and no gpuIndex selects, on each fresh
 * agent, the same values for as long as that agent's stored state is the same. So each agent's
 * part (its counts and values, in order) is kept per field, keyed by the agent's version
 * (cluster_node_view.version: unique to one state of one agent), and a selection after a change
 * visits only the agents that changed. The answers are those of a full visit, value for value. */
#ifndef GS_GATEWAY_MEMO_H
#define GS_GATEWAY_MEMO_H

#include <stddef.h>
#include <stdint.h>

#include "core/sample.h"

struct gwmemo;     /* every field's parts; thread-safe */
struct gwmemo_sel; /* one field's, held by one selection */

/* One agent's part of a selection. */
struct gwmemo_part {
  uint64_t version; /* 0: empty */
  size_t matched, selected, fresh;
  size_t n;
  double *vals;
};

struct gwmemo *gwmemo_new(void);
void gwmemo_free(struct gwmemo *m);
/* Field f's parts, held (locked) until gwmemo_end; NULL on ENOMEM (then select without). */
struct gwmemo_sel *gwmemo_begin(struct gwmemo *m, enum gpu_field f);
void gwmemo_end(struct gwmemo_sel *s);
/* The part kept for the agent visited at position pos, if it is of that version; else NULL. */
const struct gwmemo_part *gwmemo_get(struct gwmemo_sel *s, size_t pos, uint64_t version);
/* Keeps a part for position pos (nothing on ENOMEM). */
void gwmemo_put(struct gwmemo_sel *s, size_t pos, const struct gwmemo_part *p);
/* Parts reused so far, every field (for tests and /metrics). */
uint64_t gwmemo_hits(struct gwmemo *m);

#endif
