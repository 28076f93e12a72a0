/* WatchGPUs heartbeats, the agent's side: what counts as a change between two passes
 * (node_snapshot_changes) and when a stream with heartbeat terms sends (node_watch_due), as
 * proto/node.proto's WatchGPUsRequest says. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/node.h"

/* Two GPUs, one vLLM pod: the pass taken at time t (times differ between passes, nothing else). */
static void mk(struct node_snapshot *s, int64_t t) {
  memset(s, 0, sizeof *s);
  snprintf(s->node, sizeof s->node, "node-a");
  s->interval_ms = 1000;
  s->generation = (uint64_t)t;
  s->taken_ms = 1700000000000 + t * 1000;
  s->attribution = s->engines_on = true;
  s->n = 2;
  s->gpus = calloc(2, sizeof *s->gpus);
  assert_non_null(s->gpus);
  for (int i = 0; i < 2; i++) {
    struct node_gpu *g = &s->gpus[i];
    g->info.index = i;
    snprintf(g->info.uuid, sizeof g->info.uuid, "GPU-%d", i);
    g->has_sample = g->fresh = true;
    g->latest.ts_ms = s->taken_ms - 20;
    g->latest.mono_ms = t * 1000;
    g->age_ms = 20 + t % 7;
    sample_set(&g->latest, GF_GPU_UTIL, 40.0 + i);
    sample_set(&g->latest, GF_POWER_W, 250.5);
    g->pods.n = g->pods.total = g->pods.holders = 1;
    snprintf(g->pods.pods[0].ns, sizeof g->pods.pods[0].ns, "llm");
    snprintf(g->pods.pods[0].pod, sizeof g->pods.pods[0].pod, "vllm-%d", i);
  }
  s->n_engines = 1;
  s->engines = calloc(1, sizeof *s->engines);
  assert_non_null(s->engines);
  snprintf(s->engines[0].ns, sizeof s->engines[0].ns, "llm");
  snprintf(s->engines[0].pod, sizeof s->engines[0].pod, "vllm-0");
  s->engines[0].kind = ENGINE_VLLM;
  s->engines[0].fresh = true;
  s->engines[0].ts_ms = s->taken_ms - 300;
  s->engines[0].valid = ES_BIT(ES_VLLM_QUEUE_DEPTH);
  s->engines[0].v[ES_VLLM_QUEUE_DEPTH] = 3;
}

static void changes(const struct node_snapshot *a, const struct node_snapshot *b, uint64_t *f,
                    bool *other) {
  node_snapshot_changes(a, b, f, other);
}

/* Only the times differ: no change, whatever garbage follows a string's NUL. */
static void test_times_are_no_change(void **state) {
  (void)state;
  struct node_snapshot a, b;
  mk(&a, 1);
  mk(&b, 2);
  memset(b.gpus[0].info.name + 1, 'x', 10); /* after the NUL of an empty name */
  uint64_t f = 1;
  bool other = true;
  changes(&a, &b, &f, &other);
  assert_int_equal(f, 0);
  assert_false(other);
  /* A NaN that stays a NaN is no change either (compared bitwise). */
  a.gpus[1].latest.v[GF_POWER_W] = b.gpus[1].latest.v[GF_POWER_W] = NAN;
  changes(&a, &b, &f, &other);
  assert_int_equal(f, 0);
  assert_false(other);
  node_snapshot_clear(&a);
  node_snapshot_clear(&b);
}

/* A reading's value, presence or failure is a change of its field; anything else is "other". */
static void test_what_changed(void **state) {
  (void)state;
  struct node_snapshot a, b;
  uint64_t f;
  bool other;
  mk(&a, 1);

  mk(&b, 2);
  b.gpus[1].latest.v[GF_POWER_W] = 251.0;
  changes(&a, &b, &f, &other);
  assert_int_equal(f, GF_BIT(GF_POWER_W));
  assert_false(other);
  node_snapshot_clear(&b);

  mk(&b, 2);
  b.gpus[0].latest.valid &= ~GF_BIT(GF_GPU_UTIL);
  b.gpus[0].latest.failed |= GF_BIT(GF_GPU_UTIL) | GF_BIT(GF_TEMP_C);
  changes(&a, &b, &f, &other);
  assert_int_equal(f, GF_BIT(GF_GPU_UTIL) | GF_BIT(GF_TEMP_C));
  assert_false(other);
  node_snapshot_clear(&b);

  /* Each of these is no reading: sent at once whatever the stream watches. */
  for (int k = 0; k < 7; k++) {
    mk(&b, 2);
    switch (k) {
    case 0:
      snprintf(b.gpus[1].pods.pods[0].pod, sizeof b.gpus[1].pods.pods[0].pod, "vllm-9");
      break;
    case 1: b.gpus[0].fresh = false; break;
    case 2: b.gpus[0].health = GPU_HEALTH_ERROR; break;
    case 3: b.engines[0].v[ES_VLLM_QUEUE_DEPTH] = 4; break;
    case 4: b.engines[0].state = ENGINE_POD_NOT_READY; break;
    case 5: b.n = 1; break;
    case 6: snprintf(b.gpus[0].info.uuid, sizeof b.gpus[0].info.uuid, "GPU-7"); break;
    }
    changes(&a, &b, &f, &other);
    assert_true(other);
    node_snapshot_clear(&b);
  }
  /* The engine pod's scrape time alone is no change. */
  mk(&b, 2);
  b.engines[0].ts_ms += 5000;
  changes(&a, &b, &f, &other);
  assert_false(other);
  node_snapshot_clear(&b);
  /* ... unless that scrape finished requests: a latency window sums every scrape, so a new
   * scrape with the same counts as the last is sent (an idle one, 0 finished, may wait). */
  for (int k = 0; k < 2; k++) {
    struct node_snapshot c;
    mk(&c, 2);
    c.engines[0].valid |= ES_BIT(ES_VLLM_TTFT);
    c.engines[0].v[ES_VLLM_TTFT] = k; /* 0 (idle), then 1 */
    c.engines[0].lat[0].n = 1;
    c.engines[0].lat[0].le[0] = INFINITY;
    c.engines[0].lat[0].cum[0] = k;
    mk(&b, 2);
    b.engines[0] = c.engines[0];
    b.engines[0].ts_ms += 5000;
    changes(&c, &b, &f, &other);
    assert_true(other == (k == 1));
    node_snapshot_clear(&b);
    node_snapshot_clear(&c);
  }
  node_snapshot_clear(&a);
}

/* node_watch_due: every pass without terms; with them, a watched change or "other" at once, an
 * unwatched one only with the heartbeat, the heartbeat at the N-th pass. */
static void test_due(void **state) {
  (void)state;
  const uint64_t util = GF_BIT(GF_GPU_UTIL), power = GF_BIT(GF_POWER_W);
  assert_true(node_watch_due(0, 0, 1, 0, false));
  assert_true(node_watch_due(1, util, 1, 0, false));
  assert_false(node_watch_due(5, util, 1, 0, false));
  assert_false(node_watch_due(5, util, 4, power, false));
  assert_true(node_watch_due(5, util, 5, 0, false));
  assert_true(node_watch_due(5, util, 1, util | power, false));
  assert_true(node_watch_due(5, util, 1, 0, true));
  assert_true(node_watch_due(5, 0, 1, power, false)); /* 0: every field is watched */
  /* A request over NODE_HEARTBEAT_MAX is capped. */
  assert_false(node_watch_due(1000, util, NODE_HEARTBEAT_MAX - 1, 0, false));
  assert_true(node_watch_due(1000, util, NODE_HEARTBEAT_MAX, 0, false));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_times_are_no_change),
      cmocka_unit_test(test_what_changed),
      cmocka_unit_test(test_due),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
