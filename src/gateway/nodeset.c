/* The set of GPU nodes the gateway must see: what joins it (a report, an API GPU node), what
 * leaves it (the API no longer lists it, or, without the API, no report for forget_ms). */
#include "gateway/nodeset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

void nodeset_init(struct nodeset *s, int64_t forget_ms) {
  memset(s, 0, sizeof *s);
  s->forget_ms = forget_ms < 0 ? NODESET_DEFAULT_FORGET_MS : forget_ms;
}

void nodeset_clear(struct nodeset *s) {
  if (!s)
    return;
  free(s->e);
  s->e = NULL;
  s->n = s->cap = 0;
}

/* Binary search; the index of name, or where it would go (*found false). */
static size_t find(const struct nodeset *s, const char *name, bool *found) {
  size_t lo = 0, hi = s->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int cmp = strcmp(s->e[mid].name, name);
    if (cmp == 0) {
      *found = true;
      return mid;
    }
    if (cmp < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  *found = false;
  return lo;
}

const struct nodeset_entry *nodeset_find(const struct nodeset *s, const char *name) {
  bool found;
  size_t at = find(s, name, &found);
  return found ? &s->e[at] : NULL;
}

static int reserve(struct nodeset *s, size_t more) {
  if (s->n + more <= s->cap)
    return 0;
  size_t cap = s->cap ? s->cap : 16;
  while (cap < s->n + more)
    cap *= 2;
  struct nodeset_entry *ne = realloc(s->e, cap * sizeof *ne);
  if (!ne)
    return GS_ENOMEM;
  s->e = ne;
  s->cap = cap;
  return 0;
}

/* The entry for name, added when absent (room must have been reserved). */
static struct nodeset_entry *get_or_add(struct nodeset *s, const char *name) {
  bool found;
  size_t at = find(s, name, &found);
  if (found)
    return &s->e[at];
  memmove(&s->e[at + 1], &s->e[at], (s->n - at) * sizeof *s->e);
  s->n++;
  struct nodeset_entry *e = &s->e[at];
  memset(e, 0, sizeof *e);
  snprintf(e->name, sizeof e->name, "%s", name);
  return e;
}

static void remove_at(struct nodeset *s, size_t at, char *left, size_t leftlen, size_t nth) {
  if (left && leftlen) {
    size_t used = strlen(left);
    const struct nodeset_entry *e = &s->e[at];
    if (nth < 8 && used + 3 < leftlen)
      snprintf(left + used, leftlen - used, "%s%s%s%s%s", used ? ", " : "", e->name,
               e->api_leaving[0] ? " (being removed: " : "", e->api_leaving,
               e->api_leaving[0] ? ")" : "");
    else if (nth == 8 && used + 5 < leftlen)
      snprintf(left + used, leftlen - used, ", ...");
  }
  memmove(&s->e[at], &s->e[at + 1], (s->n - at - 1) * sizeof *s->e);
  s->n--;
}

int nodeset_report(struct nodeset *s, const char *was, const char *node, size_t gpus, int64_t now) {
  if (!node || !*node)
    return 0;
  if (reserve(s, 1))
    return GS_ENOMEM;
  bool moved = !was || strcmp(was, node) != 0;
  struct nodeset_entry *e = get_or_add(s, node);
  e->seen = true;
  e->seen_ms = now;
  e->gpus = gpus;
  if (moved) {
    e->agents++;
    e->gone_ms = 0;
    if (was && *was)
      nodeset_agent_gone(s, was, now, NULL, 0);
  }
  return 0;
}

void nodeset_models(struct nodeset *s, const struct node_snapshot *snap) {
  bool found;
  size_t at = find(s, snap->node, &found);
  if (!found)
    return;
  struct nodeset_entry *e = &s->e[at];
  e->models_known = true;
  e->n_models = 0;
  for (size_t i = 0; i < snap->n; i++) {
    const char *name = snap->gpus[i].info.name;
    size_t k = 0;
    while (k < e->n_models && strcmp(e->models[k], name) != 0)
      k++;
    if (k == NODESET_MODELS) {
      e->models_known = false; /* too many to remember: any gpuModel may match */
      break;
    }
    if (k == e->n_models) {
      snprintf(e->models[k], sizeof e->models[k], "%s", name);
      e->model_gpus[k] = 0;
      e->n_models++;
    }
    e->model_gpus[k]++;
  }
}

bool nodeset_agent_gone(struct nodeset *s, const char *node, int64_t now, char *why,
                        size_t whylen) {
  if (!node || !*node)
    return false;
  bool found;
  size_t at = find(s, node, &found);
  if (!found || s->e[at].agents == 0)
    return false;
  if (--s->e[at].agents > 0)
    return false;
  s->e[at].gone_ms = now;
  if (!s->e[at].api_leaving[0])
    return false;
  if (why && whylen)
    snprintf(why, whylen, "%s", s->e[at].api_leaving);
  remove_at(s, at, NULL, 0, 0);
  return true;
}

/* True when the API's word keeps e: it lists e as a GPU node, or as a node an agent ran on. */
static bool api_keeps(const struct nodeset_entry *e) {
  return e->api_listed && (e->api_gpu || e->seen);
}

int nodeset_apply_api(struct nodeset *s, const struct nodeset_api_node *nodes, size_t n,
                      int64_t listed_ms, char *left, size_t leftlen) {
  if (left && leftlen)
    left[0] = '\0';
  size_t gpu_nodes = 0;
  for (size_t i = 0; i < n; i++)
    gpu_nodes += nodes[i].gpu && nodes[i].name && *nodes[i].name;
  if (reserve(s, gpu_nodes))
    return GS_ENOMEM;
  for (size_t i = 0; i < s->n; i++) {
    s->e[i].api_listed = s->e[i].api_gpu = false;
    s->e[i].api_leaving[0] = '\0';
  }
  for (size_t i = 0; i < n; i++) {
    const struct nodeset_api_node *a = &nodes[i];
    if (!a->name || !*a->name)
      continue;
    bool leaving = a->leaving && *a->leaving;
    struct nodeset_entry *e;
    if (a->gpu && !leaving) {
      e = get_or_add(s, a->name);
    } else {
      bool found;
      size_t at = find(s, a->name, &found);
      if (!found)
        continue; /* neither a GPU node nor one an agent ran on */
      e = &s->e[at];
    }
    e->api_listed = true;
    e->api_gpu = a->gpu;
    snprintf(e->api_leaving, sizeof e->api_leaving, "%s", leaving ? a->leaving : "");
    snprintf(e->api_why, sizeof e->api_why, "%s", a->gpu && a->why ? a->why : "");
    if (!e->seen && a->gpus)
      e->gpus = a->gpus;
  }
  size_t gone = 0;
  for (size_t i = 0; i < s->n;) {
    const struct nodeset_entry *e = &s->e[i];
    if (e->agents == 0 &&
        (e->api_leaving[0] || (!api_keeps(e) && !(e->seen && e->seen_ms >= listed_ms))))
      remove_at(s, i, left, leftlen, gone++);
    else
      i++;
  }
  s->api = true;
  s->api_ms = listed_ms;
  return (int)gone;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * UINT64_C(1099511628211);
  return h;
}

uint64_t nodeset_api_digest(const struct nodeset *s) {
  uint64_t h = fnv(UINT64_C(14695981039346656037), &s->api, sizeof s->api);
  for (size_t i = 0; i < s->n; i++) {
    const struct nodeset_entry *e = &s->e[i];
    unsigned char flags = (unsigned char)(e->api_listed | e->api_gpu << 1);
    h = fnv(h, e->name, strlen(e->name) + 1);
    h = fnv(h, e->api_why, strlen(e->api_why) + 1);
    h = fnv(h, e->api_leaving, strlen(e->api_leaving) + 1);
    h = fnv(h, &flags, 1);
    h = fnv(h, &e->gpus, sizeof e->gpus);
  }
  return h;
}

size_t nodeset_sweep(struct nodeset *s, int64_t now, char *left, size_t leftlen) {
  if (left && leftlen)
    left[0] = '\0';
  size_t gone = 0;
  for (size_t i = 0; i < s->n;) {
    const struct nodeset_entry *e = &s->e[i];
    if (s->forget_ms > 0 && e->agents == 0 && !api_keeps(e) && e->seen &&
        now - e->seen_ms > s->forget_ms)
      remove_at(s, i, left, leftlen, gone++);
    else
      i++;
  }
  return gone;
}

void nodeset_why(const struct nodeset_entry *e, int64_t now, char *out, size_t len) {
  char api[NODESET_GPUS_LEN + 64] = "";
  if (e->api_gpu)
    snprintf(api, sizeof api, "; the Kubernetes API lists it as a GPU node (%s)",
             e->api_why[0] ? e->api_why : "GPU node");
  else if (e->api_listed)
    snprintf(api, sizeof api, "; the Kubernetes API still lists it");
  if (!e->seen)
    snprintf(out, len, "no agent has reported from it%s", api);
  else if (e->gone_ms)
    snprintf(out, len, "its agent left the agent list %.1fs ago (last report %.1fs ago)%s",
             (double)(now - e->gone_ms) / 1000.0, (double)(now - e->seen_ms) / 1000.0, api);
  else
    snprintf(out, len, "no agent reports from it (last report %.1fs ago)%s",
             (double)(now - e->seen_ms) / 1000.0, api);
}
