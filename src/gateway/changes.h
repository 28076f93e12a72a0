/* Where the cluster view last changed: a map from node name to the cluster's content stamp at
 * the last change of what a selection reads on that node (docs/gateway.md, "Sizing"). Not
 * thread-safe: the cluster view keeps it under its lock. */
#ifndef GS_GATEWAY_CHANGES_H
#define GS_GATEWAY_CHANGES_H

#include <stddef.h>
#include <stdint.h>

#include "core/node.h"

struct changes {
  struct change_slot *slots; /* open addressing, cap a power of two, at most half full */
  size_t cap, n;
};

void changes_init(struct changes *ch);
void changes_clear(struct changes *ch);
/* Records that node changed at stamp. Returns 0 or GS_ENOMEM (then the caller must treat the
 * change as one of every node). */
int changes_set(struct changes *ch, const char *node, uint64_t stamp);
/* The stamp of node's last change; 0 when none was recorded. */
uint64_t changes_get(const struct changes *ch, const char *node);

#endif
