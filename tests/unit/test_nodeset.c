/* Unit tests for the gateway's GPU node set (nodeset.c) and the API node list parser
 * (gpunodes.c): which nodes join, which stay lost after their agent leaves, and which leave
 * (issue 20, point 4; docs/gateway.md, "Lost agents"). Tables of event sequences. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/err.h"
#include "gateway/gpunodes.h"
#include "gateway/nodeset.h"

enum op { END, REP, GONE, API, SWEEP };

/* One event: REP (an agent reports `node`, its previous report named `was`), GONE (an agent
 * reporting `node` left the agent list), API (a list asked for at t: `api` is "a*,b" with '*'
 * marking GPU nodes and a final '~' nodes being removed, "a*~"), SWEEP (at t). */
struct step {
  enum op op;
  int64_t t;
  const char *node;
  const char *was;
  const char *api;
};

struct ns_case {
  const char *label;
  int64_t forget_ms;
  struct step steps[8];
  const char *want; /* the set after the steps: "a! b" ('!' = lost), sorted by name */
};

#define H (3600 * 1000LL)

static const struct ns_case cases[] = {
    {"an agent leaves the agent list: its node stays, lost",
     H,
     {{REP, 0, "a", NULL, NULL}, {GONE, 10, "a", NULL, NULL}},
     "a!"},
    {"without the API a lost node is forgotten only after forget_ms since its last report",
     H,
     {{REP, 0, "a", NULL, NULL}, {GONE, 10, "a", NULL, NULL}, {SWEEP, H, NULL, NULL, NULL}},
     "a!"},
    {"... and then it leaves",
     H,
     {{REP, 0, "a", NULL, NULL}, {GONE, 10, "a", NULL, NULL}, {SWEEP, H + 1, NULL, NULL, NULL}},
     ""},
    {"forget_ms 0: never forgotten",
     0,
     {{REP, 0, "a", NULL, NULL}, {GONE, 10, "a", NULL, NULL}, {SWEEP, 1000 * H, NULL, NULL, NULL}},
     "a!"},
    {"a node with a live agent is never forgotten",
     H,
     {{REP, 0, "a", NULL, NULL}, {SWEEP, 10 * H, NULL, NULL, NULL}},
     "a"},
    {"the API lists it as a GPU node: lost for as long as it does",
     H,
     {{REP, 0, "a", NULL, NULL},
      {GONE, 10, "a", NULL, NULL},
      {API, 20, NULL, NULL, "a*,b"},
      {SWEEP, 10 * H, NULL, NULL, NULL}},
     "a!"},
    {"the API no longer lists it (deleted, scaled down): it leaves at once",
     H,
     {{REP, 0, "a", NULL, NULL},
      {GONE, 10, "a", NULL, NULL},
      {API, 20, NULL, NULL, "a*"},
      {API, 30, NULL, NULL, "b"}},
     ""},
    {"a GPU node of the API that no agent ever reported is lost",
     H,
     {{API, 0, NULL, NULL, "gpu-1*,cpu-1"}},
     "gpu-1!"},
    {"a node without GPU capacity that no agent reported is not in the set",
     H,
     {{API, 0, NULL, NULL, "cpu-1,cpu-2"}},
     ""},
    {"a node an agent ran on, listed without GPU capacity (DRA): stays lost",
     H,
     {{REP, 0, "a", NULL, NULL},
      {GONE, 10, "a", NULL, NULL},
      {API, 20, NULL, NULL, "a"},
      {SWEEP, 10 * H, NULL, NULL, NULL}},
     "a!"},
    {"a list asked for before the last report cannot remove the node; the next one can",
     H,
     {{REP, 10, "a", NULL, NULL},
      {GONE, 12, "a", NULL, NULL},
      {API, 5, NULL, NULL, ""},
      {SWEEP, 20, NULL, NULL, NULL}},
     "a!"},
    {"... the next one can",
     H,
     {{REP, 10, "a", NULL, NULL},
      {GONE, 12, "a", NULL, NULL},
      {API, 5, NULL, NULL, ""},
      {API, 20, NULL, NULL, ""}},
     ""},
    {"a node the API does not know stays while its agent reports it",
     H,
     {{REP, 0, "a", NULL, NULL}, {API, 5, NULL, NULL, "b*"}},
     "a b!"},
    {"... and leaves with the next list after its agent went",
     H,
     {{REP, 0, "a", NULL, NULL},
      {API, 5, NULL, NULL, "b*"},
      {GONE, 6, "a", NULL, NULL},
      {API, 7, NULL, NULL, "b*"}},
     "b!"},
    {"two agents on one node (a rollout's overlap): lost only when both left",
     H,
     {{REP, 0, "a", NULL, NULL}, {REP, 1, "a", NULL, NULL}, {GONE, 2, "a", NULL, NULL}},
     "a"},
    {"... both left",
     H,
     {{REP, 0, "a", NULL, NULL},
      {REP, 1, "a", NULL, NULL},
      {GONE, 2, "a", NULL, NULL},
      {GONE, 3, "a", NULL, NULL}},
     "a!"},
    {"a new agent on the node: no longer lost",
     H,
     {{REP, 0, "a", NULL, NULL}, {GONE, 10, "a", NULL, NULL}, {REP, 20, "a", NULL, NULL}},
     "a"},
    {"an address that now reports another node: the first one is lost",
     H,
     {{REP, 0, "a", NULL, NULL}, {REP, 5, "b", "a", NULL}},
     "a! b"},
    {"an agent that keeps reporting the same node is counted once",
     H,
     {{REP, 0, "a", NULL, NULL}, {REP, 1, "a", "a", NULL}, {GONE, 2, "a", NULL, NULL}},
     "a!"},
    {"a GPU node of the API that turns into a plain one and was never reported: leaves",
     H,
     {{API, 0, NULL, NULL, "b*"}, {API, 10, NULL, NULL, "b"}},
     ""},
    /* Nodes being removed (cluster-autoscaler's ToBeDeletedByClusterAutoscaler taint, Karpenter's
     * karpenter.sh/disrupted, a deletionTimestamp): in the set only while an agent reports them. */
    {"a node being removed keeps its place while its agent reports it",
     H,
     {{REP, 0, "a", NULL, NULL}, {API, 5, NULL, NULL, "a*~"}},
     "a"},
    {"... and leaves, not lost, when its agent leaves",
     H,
     {{REP, 0, "a", NULL, NULL}, {API, 5, NULL, NULL, "a*~"}, {GONE, 6, "a", NULL, NULL}},
     ""},
    {"... also when the agent left before the list that has it as being removed",
     H,
     {{REP, 0, "a", NULL, NULL},
      {API, 5, NULL, NULL, "a*"},
      {GONE, 6, "a", NULL, NULL},
      {API, 7, NULL, NULL, "a*~"}},
     ""},
    {"a node being removed that no agent reported does not join",
     H,
     {{API, 0, NULL, NULL, "a*~,b*"}},
     "b!"},
    {"a removal called off (the taint is gone): the node is lost again once listed",
     H,
     {{REP, 0, "a", NULL, NULL},
      {API, 5, NULL, NULL, "a*~"},
      {GONE, 6, "a", NULL, NULL},
      {API, 7, NULL, NULL, "a*"}},
     "a!"},
    {"two agents on a node being removed: it stays until both left",
     H,
     {{REP, 0, "a", NULL, NULL},
      {REP, 1, "a", NULL, NULL},
      {API, 5, NULL, NULL, "a*~"},
      {GONE, 6, "a", NULL, NULL}},
     "a"},
};

/* Splits "a*,b" into API nodes (names point into buf). */
static size_t api_nodes(const char *spec, char *buf, size_t buflen, struct nodeset_api_node *out,
                        size_t cap) {
  snprintf(buf, buflen, "%s", spec);
  size_t n = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && n < cap;
       tok = strtok_r(NULL, ",", &save)) {
    size_t len = strlen(tok);
    bool leaving = len && tok[len - 1] == '~';
    if (leaving)
      tok[--len] = '\0';
    bool gpu = len && tok[len - 1] == '*';
    if (gpu)
      tok[len - 1] = '\0';
    out[n++] = (struct nodeset_api_node){tok, gpu, gpu ? 8 : 0, gpu ? "nvidia.com/gpu: 8" : NULL,
                                         leaving ? "taint ToBeDeletedByClusterAutoscaler" : NULL};
  }
  return n;
}

static void render(const struct nodeset *s, char *out, size_t len) {
  out[0] = '\0';
  for (size_t i = 0; i < s->n; i++) {
    size_t used = strlen(out);
    int w = snprintf(out + used, len - used, "%s%.64s%s", i ? " " : "", s->e[i].name,
                     nodeset_lost(&s->e[i]) ? "!" : "");
    assert_true(w > 0 && (size_t)w < len - used);
  }
}

static void test_cases(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const struct ns_case *k = &cases[i];
    struct nodeset s;
    nodeset_init(&s, k->forget_ms);
    for (const struct step *st = k->steps; st < k->steps + 8 && st->op != END; st++) {
      char buf[256], left[256];
      struct nodeset_api_node api[8];
      switch (st->op) {
      case REP: assert_int_equal(nodeset_report(&s, st->was, st->node, 2, st->t), 0); break;
      case GONE: nodeset_agent_gone(&s, st->node, st->t, NULL, 0); break;
      case API: {
        size_t n = api_nodes(st->api, buf, sizeof buf, api, 8);
        assert_true(nodeset_apply_api(&s, api, n, st->t, left, sizeof left) >= 0);
        break;
      }
      case SWEEP: nodeset_sweep(&s, st->t, left, sizeof left); break;
      case END: break;
      }
    }
    char got[256];
    render(&s, got, sizeof got);
    if (strcmp(got, k->want) != 0)
      print_error("case \"%s\": set \"%s\", want \"%s\"\n", k->label, got, k->want);
    assert_string_equal(got, k->want);
    nodeset_clear(&s);
  }
}

/* The notes name what the set knows of a lost node; the GPU count is the last report's, else the
 * API's capacity; leaving nodes are named. */
static void test_why_and_counts(void **state) {
  (void)state;
  struct nodeset s;
  nodeset_init(&s, -1);
  assert_int_equal(s.forget_ms, NODESET_DEFAULT_FORGET_MS);
  assert_int_equal(nodeset_report(&s, NULL, "gpu-a", 4, 1000), 0);
  nodeset_agent_gone(&s, "gpu-a", 3000, NULL, 0);
  char why[512];
  const struct nodeset_entry *e = nodeset_find(&s, "gpu-a");
  assert_non_null(e);
  assert_int_equal(e->gpus, 4);
  nodeset_why(e, 15000, why, sizeof why);
  assert_string_equal(why, "its agent left the agent list 12.0s ago (last report 14.0s ago)");
  struct nodeset_api_node api[] = {{"gpu-a", true, 8, "nvidia.com/gpu: 8", NULL},
                                   {"gpu-b", true, 8, "nvidia.com/gpu: 8", NULL}};
  char left[256];
  assert_int_equal(nodeset_apply_api(&s, api, 2, 16000, left, sizeof left), 0);
  e = nodeset_find(&s, "gpu-a");
  assert_int_equal(e->gpus, 4); /* what its agent last reported */
  nodeset_why(e, 15000, why, sizeof why);
  assert_non_null(strstr(why, "the Kubernetes API lists it as a GPU node (nvidia.com/gpu: 8)"));
  e = nodeset_find(&s, "gpu-b");
  assert_int_equal(e->gpus, 8); /* never reported: the API's capacity */
  nodeset_why(e, 17000, why, sizeof why);
  assert_string_equal(why, "no agent has reported from it; the Kubernetes API lists it as a GPU "
                           "node (nvidia.com/gpu: 8)");
  assert_int_equal(nodeset_apply_api(&s, NULL, 0, 20000, left, sizeof left), 2);
  assert_string_equal(left, "gpu-a, gpu-b");
  assert_int_equal(s.n, 0);
  nodeset_clear(&s);
  nodeset_clear(NULL);
}

/* The same list again changes nothing a selection reads (the gateway keeps every stamp); a GPU
 * count, a node's GPU status or a new node does. */
static void test_api_digest(void **state) {
  (void)state;
  struct nodeset s;
  nodeset_init(&s, -1);
  uint64_t empty = nodeset_api_digest(&s);
  struct nodeset_api_node api[] = {{"gpu-a", true, 8, "nvidia.com/gpu: 8", NULL},
                                   {"gpu-b", true, 8, "nvidia.com/gpu: 8", NULL}};
  char left[256];
  assert_int_equal(nodeset_apply_api(&s, api, 2, 1000, left, sizeof left), 0);
  uint64_t d1 = nodeset_api_digest(&s);
  assert_true(d1 != empty);
  assert_int_equal(nodeset_apply_api(&s, api, 2, 2000, left, sizeof left), 0);
  assert_true(nodeset_api_digest(&s) == d1);
  api[1].gpus = 4;
  api[1].why = "nvidia.com/gpu: 4";
  assert_int_equal(nodeset_apply_api(&s, api, 2, 3000, left, sizeof left), 0);
  assert_true(nodeset_api_digest(&s) != d1);
  nodeset_clear(&s);
}

/* ---- the API's NodeList ------------------------------------------------------------------ */

/* v1 Node status as the kubelet writes it: capacity and allocatable are maps of resource name to
 * a Quantity string (k8s.io/api core/v1 types.go, NodeStatus). The device plugin names: NVIDIA
 * k8s-device-plugin api/config/v1/resources.go ("nvidia.com" prefix; DefaultSharedRename appends
 * ".shared" under time-slicing's renameByDefault) and its mixed MIG strategy
 * ("nvidia.com/mig-1g.10gb"); AMD's device plugin, amd.com/gpu (DESIGN.md, "AMD GPUs"). */
#define NODE(name, cap, alloc)                                                                     \
  "{\"metadata\":{\"name\":\"" name "\",\"labels\":{\"kubernetes.io/hostname\":\"" name "\"}},"    \
  "\"status\":{\"capacity\":{\"cpu\":\"96\",\"memory\":\"1056462536Ki\",\"pods\":\"110\"" cap      \
  "},\"allocatable\":{\"cpu\":\"95500m\",\"pods\":\"110\"" alloc "}}}"

struct list_case {
  const char *label;
  const char *json;
  bool by_selector;
  int rc;
  const char *want; /* "name:gpus:why;..." for each item, or the error's text */
  const char *next;
};

static const struct list_case list_cases[] = {
    {"an 8-GPU node and a CPU node",
     "{\"kind\":\"NodeList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"7\"},"
     "\"items\":[" NODE("gpu-1", ",\"nvidia.com/gpu\":\"8\"",
                        ",\"nvidia.com/gpu\":\"8\"") "," NODE("cpu-1", "", "") "]}",
     false, 0, "gpu-1:8:nvidia.com/gpu: 8;cpu-1:0:-;", NULL},
    {"GPU capacity 0 (the device plugin is gone) is no GPU node",
     "{\"kind\":\"NodeList\",\"items\":[" NODE("gpu-2", ",\"nvidia.com/gpu\":\"0\"",
                                               ",\"nvidia.com/gpu\":\"0\"") "]}",
     false, 0, "gpu-2:0:-;", NULL},
    {"time-sliced (renamed), MIG mixed, AMD",
     "{\"kind\":\"NodeList\",\"items\":[" NODE(
         "ts", ",\"nvidia.com/gpu.shared\":\"40\"",
         "") "," NODE("mig", ",\"nvidia.com/mig-1g.10gb\":\"7\"",
                      "") "," NODE("amd", ",\"amd.com/gpu\":\"8\"", "") "]}",
     false, 0,
     "ts:40:nvidia.com/gpu.shared: 40;mig:7:nvidia.com/mig-1g.10gb: 7;amd:8:amd.com/gpu: 8;", NULL},
    {"allocatable alone makes a GPU node (its count is capacity's)",
     "{\"kind\":\"NodeList\",\"items\":[" NODE("alloc", "", ",\"nvidia.com/gpu\":\"2\"") "]}",
     false, 0, "alloc:0:nvidia.com/gpu: 2;", NULL},
    {"a suffixed quantity is a GPU node of unknown count, never its digits (1500m is 1.5)",
     "{\"kind\":\"NodeList\",\"items\":[" NODE("milli", ",\"nvidia.com/gpu\":\"1500m\"", "") "]}",
     false, 0, "milli:1:nvidia.com/gpu: 1;", NULL},
    {"under a label selector every listed node is a GPU node",
     "{\"kind\":\"NodeList\",\"items\":[" NODE("dra-1", "", "") "]}", true, 0,
     "dra-1:0:listed by --gpu-node-selector;", NULL},
    {"a page with a continue token",
     "{\"kind\":\"NodeList\",\"metadata\":{\"continue\":\"eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ\"},"
     "\"items\":[]}",
     false, 0, "", "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ"},
    /* Nodes being removed. cluster-autoscaler puts its ToBeDeletedByClusterAutoscaler taint
     * (value: the unix time, effect NoSchedule; cluster-autoscaler/utils/taints/taints.go) on a
     * node before it drains and deletes it; Karpenter its karpenter.sh/disrupted NoSchedule taint
     * (sigs.k8s.io/karpenter pkg/apis/v1/taints.go); a Node with a finalizer being deleted has
     * metadata.deletionTimestamp. The soft DeletionCandidateOfClusterAutoscaler does not count. */
    {"taints and deletionTimestamp that say a node is being removed",
     "{\"kind\":\"NodeList\",\"items\":["
     "{\"metadata\":{\"name\":\"ca\"},\"spec\":{\"unschedulable\":true,\"taints\":["
     "{\"key\":\"nvidia.com/gpu\",\"effect\":\"NoSchedule\"},"
     "{\"key\":\"ToBeDeletedByClusterAutoscaler\",\"value\":\"1764633600\","
     "\"effect\":\"NoSchedule\"}]},"
     "\"status\":{\"capacity\":{\"nvidia.com/gpu\":\"8\"}}},"
     "{\"metadata\":{\"name\":\"karp\"},\"spec\":{\"taints\":[{\"key\":"
     "\"karpenter.sh/disrupted\",\"effect\":\"NoSchedule\"}]},"
     "\"status\":{\"capacity\":{\"nvidia.com/gpu\":\"8\"}}},"
     "{\"metadata\":{\"name\":\"del\",\"deletionTimestamp\":\"2026-12-02T04:00:00Z\"},"
     "\"status\":{\"capacity\":{\"nvidia.com/gpu\":\"8\"}}},"
     "{\"metadata\":{\"name\":\"cand\"},\"spec\":{\"taints\":[{\"key\":"
     "\"DeletionCandidateOfClusterAutoscaler\",\"effect\":\"PreferNoSchedule\"}]},"
     "\"status\":{\"capacity\":{\"nvidia.com/gpu\":\"8\"}}},"
     "{\"metadata\":{\"name\":\"odd\"},\"spec\":{\"taints\":{}},"
     "\"status\":{\"capacity\":{\"nvidia.com/gpu\":\"8\"}}}]}",
     false, 0,
     "ca:8:nvidia.com/gpu: 8:taint ToBeDeletedByClusterAutoscaler;"
     "karp:8:nvidia.com/gpu: 8:taint karpenter.sh/disrupted;"
     "del:8:nvidia.com/gpu: 8:deletionTimestamp 2026-12-02T04:00:00Z;"
     "cand:8:nvidia.com/gpu: 8;odd:8:nvidia.com/gpu: 8;",
     NULL},
    {"not JSON", "{\"kind\":\"NodeList\",", false, GS_EPARSE, "not JSON", NULL},
    {"not a NodeList", "{\"kind\":\"PodList\",\"items\":[]}", false, GS_EPARSE, "not a NodeList",
     NULL},
    {"an item without a name", "{\"kind\":\"NodeList\",\"items\":[{\"metadata\":{}}]}", false,
     GS_EPARSE, "no metadata.name", NULL},
    {"items not an array", "{\"kind\":\"NodeList\",\"items\":{}}", false, GS_EPARSE, "not an array",
     NULL},
};

static void test_list_parse(void **state) {
  (void)state;
  struct gpunodes_match m;
  char err[256];
  assert_int_equal(gpunodes_match_parse(GPUNODES_DEFAULT_RESOURCES, &m, err, sizeof err), 0);
  for (size_t i = 0; i < sizeof list_cases / sizeof list_cases[0]; i++) {
    const struct list_case *k = &list_cases[i];
    m.by_selector = k->by_selector;
    struct gpunodes_page p;
    const char *perr = "";
    int rc = gpunodes_parse(k->json, strlen(k->json), &m, &p, &perr);
    char got[2048] = "";
    if (rc == 0)
      for (size_t j = 0; j < p.n; j++) {
        size_t used = strlen(got);
        snprintf(got + used, sizeof got - used, "%s:%zu:%s%s%s;", p.items[j].name, p.items[j].gpus,
                 p.items[j].gpu ? p.items[j].why : "-", p.items[j].leaving[0] ? ":" : "",
                 p.items[j].leaving);
      }
    bool ok = rc == k->rc && (rc ? strstr(perr, k->want) != NULL : strcmp(got, k->want) == 0) &&
              (rc || (k->next ? p.next && strcmp(p.next, k->next) == 0 : p.next == NULL));
    if (!ok)
      print_error("case \"%s\": rc %d got \"%s\" err \"%s\"\n", k->label, rc, got, perr);
    assert_true(ok);
    gpunodes_page_free(&p);
  }
  gpunodes_match_free(&m);
}

static void test_resources_option(void **state) {
  (void)state;
  struct gpunodes_match m;
  char err[256];
  assert_int_equal(gpunodes_match_parse("example.com/fpga,vendor.io/acc-*", &m, err, sizeof err),
                   0);
  assert_int_equal(m.n_resources, 2);
  gpunodes_match_free(&m);
  static const char *bad[] = {"nvidia.com/gpu,", ",x", "nvidia com/gpu", "a*b", ""};
  for (size_t i = 0; i < 4; i++) {
    assert_int_equal(gpunodes_match_parse(bad[i], &m, err, sizeof err), GS_EINVAL);
    assert_non_null(strstr(err, "--gpu-resources"));
  }
  /* an empty list is no resource: only a label selector can make GPU nodes then */
  assert_int_equal(gpunodes_match_parse(bad[4], &m, err, sizeof err), 0);
  assert_int_equal(m.n_resources, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cases),
      cmocka_unit_test(test_why_and_counts),
      cmocka_unit_test(test_api_digest),
      cmocka_unit_test(test_list_parse),
      cmocka_unit_test(test_resources_option),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
