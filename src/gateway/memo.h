/* Per-agent parts of selections (docs/gateway.md, "Sizing"): a selection is a fold over the
 * agents, and a fresh agent whose stored state is the same adds the same counts and values in the
 * same order. So for triggers without a window, gpuIndex or engine signal, each agent's part (its
 * counts and its values with their pod groups and shares, the groups numbered from the agent's
 * first) is kept per selection key, keyed by the agent's version (cluster_node_view.version:
 * unique to one state of one agent), and a selection after a change visits only the agents that
 * changed. The answers are those of a full visit, value for value. */
#ifndef GS_GATEWAY_MEMO_H
#define GS_GATEWAY_MEMO_H

#include <stddef.h>
#include <stdint.h>

#define GWMEMO_KEYS 64 /* distinct selections kept; the least recently used one goes first */

struct gwmemo;     /* every selection's parts; thread-safe */
struct gwmemo_sel; /* one selection's, held by one selection */

/* One agent's part of a selection. */
struct gwmemo_part {
  uint64_t version; /* 0: empty */
  size_t matched, selected, fresh;
  size_t n;         /* values */
  double *vals;     /* n values */
  uint32_t *lgroup; /* n pod groups, numbered from the first group this agent's pods started */
  double *share;    /* n shares */
  uint32_t ngroups; /* pod groups this agent's pods started */
};

struct gwmemo *gwmemo_new(void);
void gwmemo_free(struct gwmemo *m);
/* The parts of the selection named key (a string: what chooses the GPUs), held (locked) until
 * gwmemo_end; NULL on ENOMEM (then select without). */
struct gwmemo_sel *gwmemo_begin(struct gwmemo *m, const char *key);
void gwmemo_end(struct gwmemo_sel *s);
/* The part kept for the agent visited at position pos, if it is of that version; else NULL. */
const struct gwmemo_part *gwmemo_get(struct gwmemo_sel *s, size_t pos, uint64_t version);
/* Keeps a copy of p for position pos (nothing on ENOMEM). */
void gwmemo_put(struct gwmemo_sel *s, size_t pos, const struct gwmemo_part *p);
/* Parts reused so far (for tests). */
uint64_t gwmemo_hits(struct gwmemo *m);

#endif
