/* The tuned ScaledObject: the user's file with the tuned keys replaced where they are and added
 * where they are not, every other byte (comments, order, other keys, other triggers) kept. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/trigger.h"
#include "sim/tune.h"
#include "sim/yamlx.h"

#define MAX_EDITS 64

struct edit {
  size_t at, del;
  char ins[512];
};
struct edits {
  struct edit e[MAX_EDITS];
  size_t n;
};

static yaml_node_t *first_key(struct sim_yaml *y, yaml_node_t *map) {
  if (!map || map->type != YAML_MAPPING_NODE ||
      map->data.mapping.pairs.start == map->data.mapping.pairs.top)
    return NULL;
  return yaml_document_get_node(&y->doc, map->data.mapping.pairs.start->key);
}

/* Sets path[0..n) under map to value: the scalar replaced where it is, else the missing levels
 * inserted as block lines before the first key of the deepest mapping that exists. */
static int set_path(struct sim_yaml *y, yaml_node_t *map, const char *const *path, size_t n,
                    const char *value, struct edits *ed, char *err, size_t errlen) {
  size_t i = 0;
  for (; i < n; i++) {
    yaml_node_t *next = sim_yaml_get(y, map, path[i]);
    if (!next)
      break;
    if (i + 1 < n && next->type != YAML_MAPPING_NODE) {
      snprintf(err, errlen, "line %d: %s is not a mapping", sim_yaml_line(next), path[i]);
      return GS_EINVAL;
    }
    if (i + 1 == n) {
      if (next->type != YAML_SCALAR_NODE) {
        snprintf(err, errlen, "line %d: %s is not a scalar", sim_yaml_line(next), path[i]);
        return GS_EINVAL;
      }
      struct edit *e = &ed->e[ed->n++];
      e->at = next->start_mark.index;
      e->del = next->end_mark.index - next->start_mark.index;
      snprintf(e->ins, sizeof e->ins, "%s", value);
      return 0;
    }
    map = next;
  }
  yaml_node_t *k = first_key(y, map);
  if (!k || map->data.mapping.style == YAML_FLOW_MAPPING_STYLE) {
    snprintf(err, errlen, "line %d: cannot add %s to a %s mapping: write it in block style",
             sim_yaml_line(map), path[i], k ? "flow-style" : "empty");
    return GS_EINVAL;
  }
  struct edit *e = &ed->e[ed->n++];
  e->at = k->start_mark.index;
  e->del = 0;
  size_t col = k->start_mark.column, off = 0;
  for (size_t j = i; j < n; j++) {
    size_t ind = j == i ? 0 : col + 2 * (j - i);
    off += (size_t)snprintf(e->ins + off, sizeof e->ins - off, "%*s%s:%s", (int)ind, "", path[j],
                            j + 1 == n ? " " : "\n");
  }
  snprintf(e->ins + off, sizeof e->ins - off, "%s\n%*s", value, (int)col, "");
  return 0;
}

static int by_at(const void *a, const void *b) {
  const struct edit *x = a, *y = b;
  return x->at < y->at ? -1 : x->at > y->at;
}

int sim_tune_write(const char *file, const char *out, const struct sim_scaledobject *base,
                   const struct sim_knobs *k, const struct profile_set *ps, char *err,
                   size_t errlen) {
  if (base->from_http) {
    snprintf(err, errlen, "%s: an HTTPScaledObject: set the tuned values by hand", file);
    return GS_EINVAL;
  }
  char *text;
  size_t len;
  int rc = sim_read_file(file, SIM_INPUT_MAX, &text, &len, err, errlen);
  if (rc)
    return rc;
  struct sim_yaml y;
  rc = sim_yaml_load_kind(&y, text, len, file, "ScaledObject", err, errlen);
  struct edits *ed = calloc(1, sizeof *ed);
  yaml_node_t *spec = rc ? NULL : sim_yaml_get(&y, sim_yaml_root(&y), "spec");
  if (!rc && !ed)
    rc = GS_ENOMEM;
  if (!rc && !spec) {
    snprintf(err, errlen, "%s: no spec", file);
    rc = GS_EINVAL;
  }
  char v[256];
  yaml_node_t *trigs = rc ? NULL : sim_yaml_get(&y, spec, "triggers");
  struct sim_scaledobject so;
  char bufs[SIM_MAX_TRIGGERS][32];
  if (!rc)
    rc = sim_tune_apply(base, k, ps, &so, bufs, err, errlen);
  for (size_t i = 0; !rc && i < base->ntrig && i < sim_yaml_len(trigs); i++) {
    const struct sim_trigger *t = &so.trig[i];
    yaml_node_t *md = sim_yaml_item(&y, trigs, i);
    static const char *const tv[] = {"metadata", "targetValue"};
    static const char *const th[] = {"metadata", "threshold"};
    if (t->kind == SIM_TRIG_GPUSCALE) {
      snprintf(v, sizeof v, "\"%s\"", bufs[i]);
      rc = set_path(&y, md, tv, 2, v, ed, err, errlen);
    } else if (t->kind == SIM_TRIG_PROMETHEUS) {
      snprintf(v, sizeof v, "\"%.4g\"", t->threshold);
      rc = set_path(&y, md, th, 2, v, ed, err, errlen);
    }
  }
  static const char *const minr[] = {"minReplicaCount"}, *const poll[] = {"pollingInterval"};
  static const char *const down[] = {"advanced", "horizontalPodAutoscalerConfig", "behavior",
                                     "scaleDown", "stabilizationWindowSeconds"};
  static const char *const up[] = {"advanced", "horizontalPodAutoscalerConfig", "behavior",
                                   "scaleUp"};
  if (!rc) {
    snprintf(v, sizeof v, "%d", k->min_replicas);
    rc = set_path(&y, spec, minr, 1, v, ed, err, errlen);
  }
  if (!rc) {
    snprintf(v, sizeof v, "%d", k->polling_s);
    rc = set_path(&y, spec, poll, 1, v, ed, err, errlen);
  }
  /* the behavior block: one edit when it is absent, so that two keys under it do not each add
   * its parents */
  yaml_node_t *beh = rc ? NULL : sim_yaml_get(&y, spec, "advanced");
  for (size_t i = 1; beh && i < 3; i++)
    beh = sim_yaml_get(&y, beh, up[i]);
  bool up_too = k->up_pods != 4; /* 4 Pods or 100 % per 15 s is the HPA's default */
  if (!rc && !beh) {
    int o = snprintf(v, sizeof v, "{scaleDown: {stabilizationWindowSeconds: %d}", k->down_s);
    if (up_too)
      snprintf(v + o, sizeof v - (size_t)o,
               ", scaleUp: {selectPolicy: Max, policies: [{type: Pods, value: %d, "
               "periodSeconds: 15}, {type: Percent, value: 100, periodSeconds: 15}]}}",
               k->up_pods);
    else
      snprintf(v + o, sizeof v - (size_t)o, "}");
    rc = set_path(&y, spec, up, 3, v, ed, err, errlen);
  } else if (!rc) {
    snprintf(v, sizeof v, "%d", k->down_s);
    rc = set_path(&y, spec, down, 5, v, ed, err, errlen);
    if (!rc && up_too && sim_yaml_get(&y, beh, "scaleUp")) {
      snprintf(err, errlen, "line %d: scaleUp is set: make its Pods policy %d per 15 s by hand",
               sim_yaml_line(beh), k->up_pods);
      rc = GS_EINVAL;
    } else if (!rc && up_too) {
      snprintf(v, sizeof v,
               "{selectPolicy: Max, policies: [{type: Pods, value: %d, periodSeconds: 15}, "
               "{type: Percent, value: 100, periodSeconds: 15}]}",
               k->up_pods);
      rc = set_path(&y, spec, up, 4, v, ed, err, errlen);
    }
  }
  if (!rc) {
    qsort(ed->e, ed->n, sizeof ed->e[0], by_at);
    FILE *f = strcmp(out, "-") ? fopen(out, "w") : stdout;
    if (!f) {
      snprintf(err, errlen, "%s: cannot write the tuned ScaledObject", out);
      rc = GS_EIO;
    } else {
      /* the file's bytes between the edits, in order */
      size_t prev = 0;
      for (size_t i = 0; i < ed->n && !rc; i++) {
        const struct edit *e = &ed->e[i];
        if (fwrite(text + prev, 1, e->at - prev, f) != e->at - prev || fputs(e->ins, f) < 0)
          rc = GS_EIO;
        prev = e->at + e->del;
      }
      if (!rc && fwrite(text + prev, 1, len - prev, f) != len - prev)
        rc = GS_EIO;
      if (f != stdout && fclose(f) != 0)
        rc = GS_EIO;
      if (rc == GS_EIO)
        snprintf(err, errlen, "%s: cannot write the tuned ScaledObject", out);
    }
  }
  free(ed);
  sim_yaml_free(&y);
  free(text);
  return rc;
}
