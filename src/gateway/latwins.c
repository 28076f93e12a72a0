/* The gateway's per-pod latency windows (latwins.h). */
#include "gateway/latwins.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

void latwins_free(struct gw_latwins *l) {
  for (size_t i = 0; l && i < l->n; i++)
    latwin_free(&l->e[i].w);
  if (l) {
    free(l->e);
    l->e = NULL;
    l->n = 0;
  }
}

static bool is_pod(const struct gw_latwin *e, const struct engine_reading *r) {
  return strcmp(e->ns, r->ns) == 0 && strcmp(e->pod, r->pod) == 0;
}

int latwins_update(struct gw_latwins *l, const struct engine_reading *rs, size_t n) {
  bool same = l->n == n;
  for (size_t i = 0; same && i < n; i++)
    same = is_pod(&l->e[i], &rs[i]);
  if (!same) { /* pods came, left or moved: each keeps its ring */
    struct gw_latwin *e = n ? calloc(n, sizeof *e) : NULL;
    if (n && !e) {
      latwins_free(l);
      return GS_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
      snprintf(e[i].ns, sizeof e[i].ns, "%s", rs[i].ns);
      snprintf(e[i].pod, sizeof e[i].pod, "%s", rs[i].pod);
      for (size_t j = 0; j < l->n; j++) {
        size_t k = (i + j) % l->n; /* the same place first */
        if (l->e[k].w.len && is_pod(&l->e[k], &rs[i])) {
          e[i].w = l->e[k].w;
          memset(&l->e[k].w, 0, sizeof l->e[k].w); /* moved */
          break;
        }
      }
    }
    latwins_free(l);
    l->e = e;
    l->n = n;
  }
  int rc = 0;
  for (size_t i = 0; i < n; i++)
    if (rs[i].fresh && rs[i].state == ENGINE_POD_SERVING && latwin_wanted(&rs[i]) &&
        latwin_push(&l->e[i].w, &rs[i]))
      rc = GS_ENOMEM;
  return rc;
}

const struct latwin *latwins_at(const struct gw_latwins *l, size_t i,
                                const struct engine_reading *r) {
  if (!l || i >= l->n || !is_pod(&l->e[i], r))
    return NULL;
  return &l->e[i].w;
}
