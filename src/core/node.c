/* Node snapshot lifetime helpers. */
#include "core/node.h"

#include <stdlib.h>
#include <string.h>

void node_snapshot_clear(struct node_snapshot *s) {
  if (!s)
    return;
  free(s->gpus);
  free(s->engines);
  memset(s, 0, sizeof *s);
}
