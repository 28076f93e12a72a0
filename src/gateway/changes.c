/* Node name -> stamp of its last change: an open-addressing hash table (FNV-1a, linear
 * probing) that only grows; node names are few (one per GPU node the gateway has seen). */
#include "gateway/changes.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

struct change_slot {
  bool used;
  uint64_t stamp;
  char name[NODE_NAME_LEN];
};

void changes_init(struct changes *ch) {
  memset(ch, 0, sizeof *ch);
}

void changes_clear(struct changes *ch) {
  free(ch->slots);
  changes_init(ch);
}

static uint64_t hash(const char *s) {
  uint64_t h = 1469598103934665603ULL;
  for (; *s; s++) {
    h ^= (unsigned char)*s;
    h *= 1099511628211ULL;
  }
  return h;
}

static struct change_slot *slot_of(const struct change_slot *slots, size_t cap, const char *node) {
  size_t i = (size_t)hash(node) & (cap - 1);
  while (slots[i].used && strcmp(slots[i].name, node) != 0)
    i = (i + 1) & (cap - 1);
  return (struct change_slot *)&slots[i];
}

static int grow(struct changes *ch) {
  size_t cap = ch->cap ? ch->cap * 2 : 64;
  struct change_slot *ns = calloc(cap, sizeof *ns);
  if (!ns)
    return GS_ENOMEM;
  for (size_t i = 0; i < ch->cap; i++)
    if (ch->slots[i].used)
      *slot_of(ns, cap, ch->slots[i].name) = ch->slots[i];
  free(ch->slots);
  ch->slots = ns;
  ch->cap = cap;
  return 0;
}

int changes_set(struct changes *ch, const char *node, uint64_t stamp) {
  if (2 * (ch->n + 1) > ch->cap && grow(ch) != 0)
    return GS_ENOMEM;
  struct change_slot *s = slot_of(ch->slots, ch->cap, node);
  if (!s->used) {
    s->used = true;
    snprintf(s->name, sizeof s->name, "%s", node);
    ch->n++;
  }
  s->stamp = stamp;
  return 0;
}

uint64_t changes_get(const struct changes *ch, const char *node) {
  if (!ch->cap)
    return 0;
  const struct change_slot *s = slot_of(ch->slots, ch->cap, node);
  return s->used ? s->stamp : 0;
}
