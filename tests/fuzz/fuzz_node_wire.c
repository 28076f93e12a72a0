/* libFuzzer target for node_wire_decode, the gateway's reader of each agent's NodeSnapshot stream
 * (rpc/watch.c), GPUs and engine pods alike. A decoded snapshot must respect the caps and the
 * share rules the decoder promises, hold only finite readings, encode again, and decode to the
 * same snapshot. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/node.h"
#include "rpc/node_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX (1u << 20)

static void check(const struct node_snapshot *s) {
  if (s->n > NODE_MAX_GPUS || s->n_engines > ENGINE_MAX_PODS || (s->n && !s->gpus) ||
      (s->n_engines && !s->engines) || !memchr(s->node, '\0', sizeof s->node))
    abort();
  for (size_t i = 0; i < s->n; i++) {
    const struct node_gpu *g = &s->gpus[i];
    if (g->pods.n > ATTRIB_MAX_PODS || g->latest.mono_ms != 0 ||
        !memchr(g->info.uuid, '\0', sizeof g->info.uuid) ||
        !memchr(g->reason, '\0', sizeof g->reason))
      abort();
    double sum = 0;
    for (size_t k = 0; k < g->pods.n; k++) {
      double sh = g->pods.pods[k].share;
      if (!(sh >= 0 && sh <= 1))
        abort();
      sum += sh;
    }
    (void)sum; /* the per-pod sum rule counts distinct pods: the decoder checks it */
    for (int f = 0; f < GF__COUNT; f++)
      if (sample_has(&g->latest, (enum gpu_field)f) && !isfinite(g->latest.v[f]))
        abort(); /* a value that reaches the policy is a number */
  }
  for (size_t i = 0; i < s->n_engines; i++) {
    const struct engine_reading *r = &s->engines[i];
    if ((unsigned)r->kind >= ENGINE__COUNT || (r->valid >> ES__COUNT) != 0 ||
        !memchr(r->pod, '\0', sizeof r->pod) || !memchr(r->reason, '\0', sizeof r->reason))
      abort();
    for (int sg = 0; sg < ES__COUNT; sg++)
      if (engine_has(r, (enum engine_signal)sg) && !isfinite(r->v[sg]))
        abort();
  }
}

static bool same_double(double a, double b) {
  return a == b || (isnan(a) && isnan(b));
}

static void same(const struct node_snapshot *a, const struct node_snapshot *b) {
  if (strcmp(a->node, b->node) || a->n != b->n || a->n_engines != b->n_engines ||
      a->generation != b->generation || a->engines_on != b->engines_on)
    abort();
  for (size_t i = 0; i < a->n; i++) {
    const struct node_gpu *x = &a->gpus[i], *y = &b->gpus[i];
    if (x->info.index != y->info.index || strcmp(x->info.uuid, y->info.uuid) ||
        x->health != y->health || x->has_sample != y->has_sample || x->pods.n != y->pods.n ||
        x->latest.valid != y->latest.valid)
      abort();
    for (int f = 0; f < GF__COUNT; f++)
      if (sample_has(&x->latest, (enum gpu_field)f) && !same_double(x->latest.v[f], y->latest.v[f]))
        abort();
  }
  for (size_t i = 0; i < a->n_engines; i++) {
    const struct engine_reading *x = &a->engines[i], *y = &b->engines[i];
    if (strcmp(x->pod, y->pod) || x->kind != y->kind || x->valid != y->valid)
      abort();
    for (int s = 0; s < ES__COUNT; s++)
      if (engine_has(x, (enum engine_signal)s) && !same_double(x->v[s], y->v[s]))
        abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct node_snapshot s;
  memset(&s, 0, sizeof s);
  const char *err = NULL;
  int rc = node_wire_decode(data, size, FUZZ_MAX, &s, &err);
  if (rc) {
    if ((rc != GS_EPARSE && rc != GS_ETOOBIG && rc != GS_ENOMEM) || !err || s.n || s.gpus ||
        s.n_engines || s.engines)
      abort();
    return 0;
  }
  check(&s);
  uint8_t *bytes = NULL;
  size_t len = 0;
  if (node_wire_encode(&s, NODE_WIRE_MAX_BYTES, &bytes, &len) == 0) {
    struct node_snapshot again;
    memset(&again, 0, sizeof again);
    if (node_wire_decode(bytes, len, NODE_WIRE_MAX_BYTES, &again, &err) != 0)
      abort(); /* what we decoded, we can send */
    same(&s, &again);
    node_snapshot_clear(&again);
    free(bytes);
  }
  node_snapshot_clear(&s);
  return 0;
}
