/* Parses mock scenario YAML (libyaml document API) and evaluates each metric's pattern at a time.
 */
#include "collect/scenario.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "core/err.h"
#include "core/pattern.h"
#include "core/timeutil.h"

/* Upper bounds that no real GPU reaches; they keep arithmetic finite. */
#define MEM_TOTAL_MAX_MIB 16777216.0 /* 16 TiB */
#define VALUE_MAX 1e9
#define PATH_MAX_LEN 4096
#define KEYPATH_LEN 160

const char scenario_default_yaml[] =
    "# gpuscale built-in mock scenario: four GPUs with different loads.\n"
    "# Used when the agent runs with --collector mock and no --scenario file.\n"
    "# Same content as the string scenario_default_yaml in src/collect/scenario.c.\n"
    "driver_version: mock-550.54.15\n"
    "gpus:\n"
    "  # GPU 0: busy inference server (util ~85%, memory ~70%).\n"
    "  - model: NVIDIA H100 80GB HBM3\n"
    "    memory_total_mib: 81559\n"
    "    memory_used_mib: 57000\n"
    "    gpu_utilization: {sine: {min: 80, max: 90, period: 45s}}\n"
    "    memory_utilization: 48\n"
    "    temperature: 68\n"
    "    power_draw: {sine: {min: 520, max: 600, period: 45s}}\n"
    "  # GPU 1: moderate, oscillating load (util 25..65%, memory 45%).\n"
    "  - model: NVIDIA A100-SXM4-80GB\n"
    "    memory_total_mib: 81920\n"
    "    memory_used_mib: 36864\n"
    "    gpu_utilization: {sine: {min: 25, max: 65, period: 120s}}\n"
    "    memory_utilization: 22\n"
    "    temperature: 55\n"
    "    power_draw: {sine: {min: 180, max: 300, period: 120s}}\n"
    "  # GPU 2: nearly idle (util 3%, memory 3%).\n"
    "  - model: NVIDIA L4\n"
    "    memory_total_mib: 23034\n"
    "    memory_used_mib: 690\n"
    "    gpu_utilization: 3\n"
    "    memory_utilization: 1\n"
    "    temperature: 38\n"
    "    power_draw: 17.5\n"
    "  # GPU 3: memory-heavy (memory 90%, util 60%).\n"
    "  - model: NVIDIA A100-SXM4-40GB\n"
    "    memory_total_mib: 40960\n"
    "    memory_used_mib: 36864\n"
    "    gpu_utilization: 60\n"
    "    memory_utilization: 35\n"
    "    temperature: 62\n"
    "    power_draw: 250\n";

/* The metrics a scenario may give, with their ranges. */
struct metric_def {
  const char *key;
  enum gpu_field field;
  double lo, hi;
  const char *allowed;
};

static const struct metric_def metric_defs[] = {
    {"gpu_utilization", GF_GPU_UTIL, 0, 100, "a number from 0 to 100"},
    {"memory_utilization", GF_MEM_UTIL, 0, 100, "a number from 0 to 100"},
    {"memory_used_mib", GF_MEM_USED_MIB, 0, MEM_TOTAL_MAX_MIB,
     "a number from 0 to memory_total_mib"},
    {"temperature", GF_TEMP_C, 0, VALUE_MAX, "a number >= 0 (degrees C)"},
    {"power_draw", GF_POWER_W, 0, VALUE_MAX, "a number >= 0 (watts)"},
};
#define N_METRICS (sizeof metric_defs / sizeof metric_defs[0])

static const char root_keys[] = "driver_version, gpus, description";
static const char gpu_keys[] =
    "model, uuid, pci_bus_id, health, memory_total_mib, gpu_utilization, "
    "memory_utilization, memory_used_mib, temperature, power_draw";
static const char pattern_keys[] = "steps, sine, csv, repeat, period, interpolate";
static const char sine_keys[] = "min, max, period, phase";
static const char pattern_allowed[] =
    "a number, or a pattern map {steps: [[0s, V], [30s, V], ...]}, {sine: {min, max, period}} or "
    "{csv: FILE}";

struct ctx {
  yaml_document_t *doc;
  const char *name;     /* file name for messages */
  const char *base_dir; /* NULL: csv not allowed */
  char *err;
  size_t errlen;
  size_t points; /* steps + csv rows so far */
};

/* ---- error helpers ---- */

__attribute__((format(printf, 5, 6))) static int fail(struct ctx *c, int code, const yaml_node_t *n,
                                                      const char *path, const char *fmt, ...) {
  if (c->err && c->errlen) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(c->err, c->errlen, "%s:%zu: %s: %s", c->name, n ? n->start_mark.line + 1 : 1, path,
             msg);
  }
  return code;
}

__attribute__((format(printf, 3, 4))) static void set_err(char *err, size_t errlen, const char *fmt,
                                                          ...) {
  if (!err || !errlen)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

/* ---- scalar helpers ---- */

static yaml_node_t *node_at(struct ctx *c, int id) {
  return yaml_document_get_node(c->doc, id);
}

/* The text of a scalar node, or NULL when n is not a scalar or holds a NUL byte. */
static const char *scalar_text(const yaml_node_t *n) {
  if (!n || n->type != YAML_SCALAR_NODE)
    return NULL;
  const char *s = (const char *)n->data.scalar.value;
  if (strlen(s) != n->data.scalar.length)
    return NULL;
  return s;
}

static int get_number(struct ctx *c, const yaml_node_t *n, const char *path, double lo, double hi,
                      const char *allowed, double *out) {
  const char *s = scalar_text(n);
  double v;
  if (!s || pattern_number(s, strlen(s), &v) != 0)
    return fail(c, GS_EPARSE, n, path, "not a number; allowed: %s", allowed);
  if (v < lo || v > hi)
    return fail(c, GS_EINVAL, n, path, "%g is out of range; allowed: %s", v, allowed);
  *out = v;
  return 0;
}

/* "0", "0s", "0.0ms"...: duration_parse_ms rejects zero, but a pattern may start at zero. */
static bool is_zero_duration(const char *s) {
  bool digit = false, dot = false;
  while (*s == '0' || (*s == '.' && !dot)) {
    if (*s == '.')
      dot = true;
    else
      digit = true;
    s++;
  }
  if (!digit)
    return false;
  return *s == '\0' || strcmp(s, "ms") == 0 || strcmp(s, "s") == 0 || strcmp(s, "m") == 0 ||
         strcmp(s, "h") == 0 || strcmp(s, "d") == 0;
}

/* A duration in seconds; allow_zero also accepts "0"/"0s". */
static int get_seconds(struct ctx *c, const yaml_node_t *n, const char *path, bool allow_zero,
                       double *out) {
  const char *s = scalar_text(n);
  int64_t ms;
  if (s && duration_parse_ms(s, &ms) == 0) {
    *out = (double)ms / 1000.0;
    return 0;
  }
  if (s && allow_zero && is_zero_duration(s)) {
    *out = 0;
    return 0;
  }
  return fail(c, GS_EPARSE, n, path, "not a duration; allowed: %s",
              allow_zero ? "0s or a duration such as 500ms, 30s, 1m30s, 2h"
                         : "a duration > 0 such as 500ms, 30s, 1m30s, 2h");
}

static int get_bool(struct ctx *c, const yaml_node_t *n, const char *path, bool *out) {
  const char *s = scalar_text(n);
  if (s && strcmp(s, "true") == 0)
    *out = true;
  else if (s && strcmp(s, "false") == 0)
    *out = false;
  else
    return fail(c, GS_EPARSE, n, path, "not a boolean; allowed: true, false");
  return 0;
}

/* A printable ASCII string that fits len (with its NUL). */
static int get_string(struct ctx *c, const yaml_node_t *n, const char *path, char *buf, size_t len,
                      const char *allowed) {
  const char *s = scalar_text(n);
  if (!s || !*s)
    return fail(c, GS_EPARSE, n, path, "not a string; allowed: %s", allowed);
  size_t l = strlen(s);
  if (l >= len)
    return fail(c, GS_EINVAL, n, path, "longer than %zu characters; allowed: %s", len - 1, allowed);
  for (size_t i = 0; i < l; i++)
    if (s[i] < 0x20 || s[i] > 0x7e)
      return fail(c, GS_EINVAL, n, path, "has a non-printable or non-ASCII character; allowed: %s",
                  allowed);
  memcpy(buf, s, l + 1);
  return 0;
}

/* Writes "path.key" (or "key" at the root) into sub, truncating long keys. */
static const char *key_join(char sub[KEYPATH_LEN], const char *path, const char *key) {
  int n = snprintf(sub, KEYPATH_LEN, "%s%s%.60s", path, *path ? "." : "", key);
  if (n < 0)
    sub[0] = '\0';
  return sub;
}

/* Finds key in a comma-separated list of keys; returns its position or -1. */
static int key_index(const char *list, const char *key) {
  size_t kl = strlen(key);
  int i = 0;
  const char *p = list;
  while (*p) {
    const char *e = strchr(p, ',');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    if (l == kl && memcmp(p, key, kl) == 0)
      return i;
    i++;
    if (!e)
      break;
    p = e + 1;
    while (*p == ' ')
      p++;
  }
  return -1;
}

/* Walks a mapping: for each pair checks the key is a known, non-repeated string and hands back
 * its index in keys. Returns 0 or a failure already written to err. */
struct map_iter {
  yaml_node_pair_t *pair, *end;
  uint64_t seen;
};

static int map_begin(struct ctx *c, const yaml_node_t *n, const char *path, const char *what,
                     struct map_iter *it) {
  if (!n || n->type != YAML_MAPPING_NODE)
    return fail(c, GS_EPARSE, n, path, "not a mapping; allowed: %s", what);
  it->pair = n->data.mapping.pairs.start;
  it->end = n->data.mapping.pairs.top;
  it->seen = 0;
  return 0;
}

/* Returns 1 with the next pair in idx, key and val; 0 at the end; or a negative failure. */
static int map_next(struct ctx *c, struct map_iter *it, const char *path, const char *keys,
                    int *idx, const char **key, yaml_node_t **val) {
  if (it->pair >= it->end)
    return 0;
  yaml_node_t *kn = node_at(c, it->pair->key);
  *val = node_at(c, it->pair->value);
  it->pair++;
  const char *k = scalar_text(kn);
  if (!k || !*k)
    return fail(c, GS_EPARSE, kn, path, "keys must be plain strings; allowed: %s", keys);
  char sub[KEYPATH_LEN];
  key_join(sub, path, k);
  int i = key_index(keys, k);
  if (i < 0)
    return fail(c, GS_EINVAL, kn, sub, "unknown key; allowed: %s", keys);
  if (it->seen & (UINT64_C(1) << i))
    return fail(c, GS_EINVAL, kn, sub, "duplicate key; each key may appear once");
  it->seen |= UINT64_C(1) << i;
  if (!*val)
    return fail(c, GS_EPARSE, kn, sub, "missing value");
  *idx = i;
  *key = k;
  return 1;
}

/* ---- file reading ---- */

/* Reads a regular file of at most cap bytes into a NUL-terminated malloc'd buffer. */
static int read_file(const char *path, size_t cap, char **out, size_t *outlen, char *err,
                     size_t errlen) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return GS_EIO;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    set_err(err, errlen, "%s: not a regular file", path);
    close(fd);
    return GS_EIO;
  }
  if ((unsigned long long)st.st_size > cap) {
    set_err(err, errlen, "%s: %lld bytes is over the limit of %zu bytes", path,
            (long long)st.st_size, cap);
    close(fd);
    return GS_ETOOBIG;
  }
  char *buf = malloc(cap + 1);
  if (!buf) {
    close(fd);
    set_err(err, errlen, "%s: out of memory", path);
    return GS_ENOMEM;
  }
  size_t len = 0;
  for (;;) {
    ssize_t r = read(fd, buf + len, cap + 1 - len);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      set_err(err, errlen, "%s: cannot read: %s", path, strerror(errno));
      free(buf);
      close(fd);
      return GS_EIO;
    }
    if (r == 0)
      break;
    len += (size_t)r;
    if (len > cap) { /* grew while we read it */
      set_err(err, errlen, "%s: over the limit of %zu bytes", path, cap);
      free(buf);
      close(fd);
      return GS_ETOOBIG;
    }
  }
  close(fd);
  buf[len] = '\0';
  *out = buf;
  *outlen = len;
  return 0;
}

/* ---- CSV ---- */

int scenario_csv_parse(const char *data, size_t len, const char *name, struct pattern_point **out,
                       size_t *n, char *err, size_t errlen) {
  return pattern_csv_parse(data, len, name, -VALUE_MAX, VALUE_MAX, "a finite number", out, n, err,
                           errlen);
}

/* ---- patterns ---- */

static int add_points(struct ctx *c, const yaml_node_t *n, const char *path, size_t k) {
  if (k > SCENARIO_MAX_POINTS - c->points)
    return fail(c, GS_ETOOBIG, n, path, "over the limit of %d steps and csv rows per scenario",
                SCENARIO_MAX_POINTS);
  c->points += k;
  return 0;
}

static int parse_steps(struct ctx *c, const yaml_node_t *n, const char *path,
                       const struct metric_def *md, struct pattern *p) {
  static const char allowed[] = "a list of [time, value] pairs starting at 0s, e.g. "
                                "[[0s, 10], [30s, 90]]";
  if (n->type != YAML_SEQUENCE_NODE)
    return fail(c, GS_EPARSE, n, path, "not a list; allowed: %s", allowed);
  size_t k = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
  if (k == 0)
    return fail(c, GS_EINVAL, n, path, "empty; allowed: %s", allowed);
  if (k > SCENARIO_MAX_STEPS)
    return fail(c, GS_ETOOBIG, n, path, "%zu steps is over the limit of %d", k, SCENARIO_MAX_STEPS);
  int rc = add_points(c, n, path, k);
  if (rc)
    return rc;
  p->points = calloc(k, sizeof *p->points);
  if (!p->points)
    return fail(c, GS_ENOMEM, n, path, "out of memory");
  for (size_t i = 0; i < k; i++) {
    char sub[KEYPATH_LEN];
    snprintf(sub, sizeof sub, "%s[%zu]", path, i);
    yaml_node_t *item = node_at(c, n->data.sequence.items.start[i]);
    if (!item || item->type != YAML_SEQUENCE_NODE ||
        item->data.sequence.items.top - item->data.sequence.items.start != 2)
      return fail(c, GS_EPARSE, item, sub, "not a [time, value] pair; allowed: %s", allowed);
    double t, v;
    rc = get_seconds(c, node_at(c, item->data.sequence.items.start[0]), sub, true, &t);
    if (rc)
      return rc;
    if (i == 0 && t != 0)
      return fail(c, GS_EINVAL, item, sub, "the first step must be at 0s; allowed: %s", allowed);
    if (i > 0 && t <= p->points[i - 1].t)
      return fail(c, GS_EINVAL, item, sub,
                  "time is not after the previous step; allowed: "
                  "strictly increasing times");
    rc = get_number(c, node_at(c, item->data.sequence.items.start[1]), sub, md->lo, md->hi,
                    md->allowed, &v);
    if (rc)
      return rc;
    p->points[i].t = t;
    p->points[i].v = v;
    p->npoints = i + 1;
  }
  pattern_range(p);
  return 0;
}

static int parse_sine(struct ctx *c, const yaml_node_t *n, const char *path,
                      const struct metric_def *md, struct pattern *p) {
  struct map_iter it;
  int rc = map_begin(c, n, path, "{min: N, max: N, period: DURATION, phase: DURATION}", &it);
  if (rc)
    return rc;
  bool has_min = false, has_max = false, has_period = false;
  int idx;
  const char *key;
  yaml_node_t *val;
  while ((rc = map_next(c, &it, path, sine_keys, &idx, &key, &val)) == 1) {
    rc = 0;
    char sub[KEYPATH_LEN];
    key_join(sub, path, key);
    switch (idx) {
    case 0:
      rc = get_number(c, val, sub, md->lo, md->hi, md->allowed, &p->min);
      has_min = true;
      break;
    case 1:
      rc = get_number(c, val, sub, md->lo, md->hi, md->allowed, &p->max);
      has_max = true;
      break;
    case 2:
      rc = get_seconds(c, val, sub, false, &p->period);
      has_period = true;
      break;
    default: rc = get_seconds(c, val, sub, true, &p->phase); break;
    }
    if (rc)
      return rc;
  }
  if (rc)
    return rc;
  const char *missing = !has_min ? "min" : !has_max ? "max" : !has_period ? "period" : NULL;
  if (missing) {
    char sub[KEYPATH_LEN];
    key_join(sub, path, missing);
    return fail(c, GS_EINVAL, n, sub,
                "required; a sine needs min, max and period (phase is "
                "optional)");
  }
  if (p->min > p->max)
    return fail(c, GS_EINVAL, n, path, "min %g is above max %g; allowed: min <= max", p->min,
                p->max);
  return 0;
}

static int parse_csv(struct ctx *c, const yaml_node_t *n, const char *path,
                     const struct metric_def *md, struct pattern *p) {
  char rel[PATH_MAX_LEN], full[PATH_MAX_LEN];
  int rc = get_string(c, n, path, rel, sizeof rel, "a path to a seconds,value CSV file");
  if (rc)
    return rc;
  if (!c->base_dir)
    return fail(c, GS_EINVAL, n, path, "csv patterns need a scenario file; not allowed here");
  if (rel[0] == '/')
    memcpy(full, rel, strlen(rel) + 1);
  else if ((size_t)snprintf(full, sizeof full, "%s/%s", c->base_dir, rel) >= sizeof full)
    return fail(c, GS_EINVAL, n, path, "path too long; allowed: up to %d characters",
                PATH_MAX_LEN - 1);
  char *data = NULL;
  size_t len = 0;
  char ferr[512];
  rc = read_file(full, SCENARIO_CSV_MAX_BYTES, &data, &len, ferr, sizeof ferr);
  if (rc == 0) {
    rc = pattern_csv_parse(data, len, full, md->lo, md->hi, md->allowed, &p->points, &p->npoints,
                           ferr, sizeof ferr);
    free(data);
  }
  if (rc)
    return fail(c, rc, n, path, "%s", ferr);
  rc = add_points(c, n, path, p->npoints);
  if (rc)
    return rc;
  pattern_range(p);
  return 0;
}

/* A metric value: a number, or a map with exactly one of steps, sine, csv. */
static int parse_pattern(struct ctx *c, const yaml_node_t *n, const char *path,
                         const struct metric_def *md, struct pattern *p) {
  memset(p, 0, sizeof *p);
  if (n->type == YAML_SCALAR_NODE) {
    const char *s = scalar_text(n);
    double v;
    if (!s || pattern_number(s, strlen(s), &v) != 0)
      return fail(c, GS_EPARSE, n, path, "not a number or pattern; allowed: %s", pattern_allowed);
    if (v < md->lo || v > md->hi)
      return fail(c, GS_EINVAL, n, path, "%g is out of range; allowed: %s", v, md->allowed);
    p->kind = PATTERN_CONST;
    p->value = p->min = p->max = v;
    return 0;
  }
  struct map_iter it;
  int rc = map_begin(c, n, path, pattern_allowed, &it);
  if (rc)
    return rc;
  const yaml_node_t *kinds[3] = {NULL, NULL, NULL}, *repeat = NULL, *period = NULL, *interp = NULL;
  int idx;
  const char *key;
  yaml_node_t *val;
  while ((rc = map_next(c, &it, path, pattern_keys, &idx, &key, &val)) == 1) {
    if (idx < 3)
      kinds[idx] = val;
    else if (idx == 3)
      repeat = val;
    else if (idx == 4)
      period = val;
    else
      interp = val;
  }
  if (rc)
    return rc;
  int nk = (kinds[0] != NULL) + (kinds[1] != NULL) + (kinds[2] != NULL);
  if (nk != 1)
    return fail(c, GS_EINVAL, n, path,
                "a pattern needs exactly one of steps, sine, csv; "
                "allowed: %s",
                pattern_allowed);
  char sub[KEYPATH_LEN];
  if (repeat) {
    key_join(sub, path, "repeat");
    if (kinds[1])
      return fail(c, GS_EINVAL, repeat, sub, "a sine always repeats; allowed with steps or csv");
    if ((rc = get_bool(c, repeat, sub, &p->repeat)))
      return rc;
  }
  if (period) {
    key_join(sub, path, "period");
    if (!kinds[0] || !p->repeat)
      return fail(c, GS_EINVAL, period, sub,
                  "allowed only with steps and repeat: true (a "
                  "sine takes its period inside sine:)");
    if ((rc = get_seconds(c, period, sub, false, &p->period)))
      return rc;
  }
  if (interp) {
    key_join(sub, path, "interpolate");
    const char *s = scalar_text(interp);
    if (!kinds[2])
      return fail(c, GS_EINVAL, interp, sub, "allowed only with csv");
    if (s && strcmp(s, "hold") == 0)
      p->hold = true;
    else if (!s || strcmp(s, "linear") != 0)
      return fail(c, GS_EINVAL, interp, sub, "not an interpolation; allowed: linear, hold");
  }
  if (kinds[0]) {
    p->kind = PATTERN_STEPS;
    key_join(sub, path, "steps");
    if ((rc = parse_steps(c, kinds[0], sub, md, p)))
      return rc;
    if (p->repeat && !period)
      return fail(c, GS_EINVAL, n, path,
                  "repeat: true with steps needs period: DURATION (the "
                  "loop length)");
    if (p->repeat && p->period <= p->points[p->npoints - 1].t)
      return fail(c, GS_EINVAL, period, sub,
                  "period must be longer than the last step's time "
                  "(%gs)",
                  p->points[p->npoints - 1].t);
  } else if (kinds[1]) {
    p->kind = PATTERN_SINE;
    key_join(sub, path, "sine");
    if ((rc = parse_sine(c, kinds[1], sub, md, p)))
      return rc;
  } else {
    p->kind = PATTERN_CSV;
    key_join(sub, path, "csv");
    if ((rc = parse_csv(c, kinds[2], sub, md, p)))
      return rc;
    p->period = p->points[p->npoints - 1].t;
    if (p->repeat && p->period <= 0)
      return fail(c, GS_EINVAL, kinds[2], sub,
                  "repeat: true needs a last row after 0 seconds "
                  "(its time is the loop length)");
  }
  return 0;
}

/* ---- GPUs and the document ---- */

static const char model_allowed[] = "a string such as \"NVIDIA A100-SXM4-80GB\"";

static int parse_gpu(struct ctx *c, const yaml_node_t *n, size_t i, struct scenario_gpu *g) {
  char path[KEYPATH_LEN];
  snprintf(path, sizeof path, "gpus[%zu]", i);
  struct map_iter it;
  int rc = map_begin(c, n, path, gpu_keys, &it);
  if (rc)
    return rc;
  g->info.index = (int)i;
  g->info.minor = (int)i;
  g->info.parent_index = -1;
  g->info.gi_id = -1;
  g->health = GPU_HEALTH_OK;
  bool has_model = false, has_total = false;
  const yaml_node_t *used_node = NULL;
  int idx;
  const char *key;
  yaml_node_t *val;
  while ((rc = map_next(c, &it, path, gpu_keys, &idx, &key, &val)) == 1) {
    rc = 0;
    char sub[KEYPATH_LEN];
    key_join(sub, path, key);
    switch (idx) {
    case 0:
      rc = get_string(c, val, sub, g->info.name, sizeof g->info.name, model_allowed);
      has_model = true;
      break;
    case 1:
      rc = get_string(c, val, sub, g->info.uuid, sizeof g->info.uuid,
                      "a string such as GPU-8f3b1c2a-0000-4000-8000-000000000001");
      break;
    case 2:
      rc = get_string(c, val, sub, g->info.pci_bus_id, sizeof g->info.pci_bus_id,
                      "a string such as 00000000:01:00.0");
      break;
    case 3: {
      const char *s = scalar_text(val);
      if (s && strcmp(s, "ok") == 0)
        g->health = GPU_HEALTH_OK;
      else if (s && strcmp(s, "lost") == 0)
        g->health = GPU_HEALTH_LOST;
      else if (s && strcmp(s, "error") == 0)
        g->health = GPU_HEALTH_ERROR;
      else
        rc = fail(c, GS_EINVAL, val, sub, "not a health state; allowed: ok, lost, error");
      break;
    }
    case 4:
      rc = get_number(c, val, sub, 1, MEM_TOTAL_MAX_MIB, "a number >= 1 (MiB)",
                      &g->memory_total_mib);
      has_total = true;
      break;
    default: {
      const struct metric_def *md = &metric_defs[idx - 5];
      rc = parse_pattern(c, val, sub, md, &g->metric[md->field]);
      g->present |= GF_BIT(md->field);
      if (md->field == GF_MEM_USED_MIB)
        used_node = val;
      break;
    }
    }
    if (rc)
      return rc;
  }
  if (rc)
    return rc;
  char sub[KEYPATH_LEN];
  if (!has_model)
    return fail(c, GS_EINVAL, n, key_join(sub, path, "model"), "required; allowed: %s",
                model_allowed);
  if (!has_total)
    return fail(c, GS_EINVAL, n, key_join(sub, path, "memory_total_mib"),
                "required; allowed: a number >= 1 (MiB)");
  if (used_node && g->metric[GF_MEM_USED_MIB].max > g->memory_total_mib)
    return fail(c, GS_EINVAL, used_node, key_join(sub, path, "memory_used_mib"),
                "reaches %g, above memory_total_mib %g; allowed: at most memory_total_mib",
                g->metric[GF_MEM_USED_MIB].max, g->memory_total_mib);
  if (!g->info.uuid[0])
    snprintf(g->info.uuid, sizeof g->info.uuid, "GPU-00000000-0000-4000-8000-%012zx", i);
  if (!g->info.pci_bus_id[0])
    snprintf(g->info.pci_bus_id, sizeof g->info.pci_bus_id, "00000000:%02zX:00.0", i + 1);
  return 0;
}

static int parse_root(struct ctx *c, const yaml_node_t *root, struct scenario *s) {
  struct map_iter it;
  int rc = map_begin(c, root, "scenario", "a mapping with gpus: [...]", &it);
  if (rc)
    return rc;
  const yaml_node_t *gpus = NULL;
  int idx;
  const char *key;
  yaml_node_t *val;
  while ((rc = map_next(c, &it, "", root_keys, &idx, &key, &val)) == 1) {
    rc = 0;
    if (idx == 0)
      rc = get_string(c, val, "driver_version", s->driver_version, sizeof s->driver_version,
                      "a string such as 550.54.15");
    else if (idx == 1)
      gpus = val;
    else if (val->type != YAML_SCALAR_NODE) /* description: free text */
      rc = fail(c, GS_EPARSE, val, "description", "not a string; allowed: free text");
    if (rc)
      return rc;
  }
  if (rc)
    return rc;
  if (!gpus)
    return fail(c, GS_EINVAL, root, "gpus", "required; allowed: a list of GPU mappings (%s)",
                gpu_keys);
  if (gpus->type != YAML_SEQUENCE_NODE)
    return fail(c, GS_EPARSE, gpus, "gpus", "not a list; allowed: a list of GPU mappings (%s)",
                gpu_keys);
  size_t n = (size_t)(gpus->data.sequence.items.top - gpus->data.sequence.items.start);
  if (n > SCENARIO_MAX_GPUS)
    return fail(c, GS_ETOOBIG, gpus, "gpus", "%zu GPUs is over the limit; allowed: 0 to %d", n,
                SCENARIO_MAX_GPUS);
  for (size_t i = 0; i < n; i++) {
    yaml_node_t *g = node_at(c, gpus->data.sequence.items.start[i]);
    s->ngpus = i + 1; /* so scenario_free releases what this GPU already holds */
    if ((rc = parse_gpu(c, g, i, &s->gpus[i])))
      return rc;
    for (size_t j = 0; j < i; j++) {
      char sub[KEYPATH_LEN];
      if (strcmp(s->gpus[j].info.uuid, s->gpus[i].info.uuid) == 0) {
        snprintf(sub, sizeof sub, "gpus[%zu].uuid", i);
        return fail(c, GS_EINVAL, g, sub, "%s is also the uuid of gpus[%zu]; allowed: unique uuids",
                    s->gpus[i].info.uuid, j);
      }
      if (strcmp(s->gpus[j].info.pci_bus_id, s->gpus[i].info.pci_bus_id) == 0) {
        snprintf(sub, sizeof sub, "gpus[%zu].pci_bus_id", i);
        return fail(c, GS_EINVAL, g, sub,
                    "%s is also the pci_bus_id of gpus[%zu]; allowed: "
                    "unique bus ids",
                    s->gpus[i].info.pci_bus_id, j);
      }
    }
  }
  s->ngpus = n;
  return 0;
}

int scenario_parse(const char *data, size_t len, const char *name, const char *base_dir,
                   struct scenario **out, char *err, size_t errlen) {
  if (!name)
    name = "<scenario>";
  if (err && errlen)
    err[0] = '\0';
  if (len > SCENARIO_MAX_BYTES) {
    set_err(err, errlen, "%s: %zu bytes is over the limit of %u bytes", name, len,
            SCENARIO_MAX_BYTES);
    return GS_ETOOBIG;
  }
  struct scenario *s = calloc(1, sizeof *s);
  if (!s) {
    set_err(err, errlen, "%s: out of memory", name);
    return GS_ENOMEM;
  }
  memcpy(s->driver_version, SCENARIO_DEFAULT_DRIVER, sizeof SCENARIO_DEFAULT_DRIVER);
  yaml_parser_t parser;
  yaml_document_t doc;
  if (!yaml_parser_initialize(&parser)) {
    free(s);
    set_err(err, errlen, "%s: out of memory", name);
    return GS_ENOMEM;
  }
  yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
  int rc = 0;
  if (!yaml_parser_load(&parser, &doc)) {
    set_err(err, errlen, "%s:%zu: yaml: %s%s%s", name, parser.problem_mark.line + 1,
            parser.problem ? parser.problem : "syntax error", parser.context ? " " : "",
            parser.context ? parser.context : "");
    rc = parser.error == YAML_MEMORY_ERROR ? GS_ENOMEM : GS_EPARSE;
    yaml_parser_delete(&parser);
    free(s);
    return rc;
  }
  struct ctx c = {&doc, name, base_dir, err, errlen, 0};
  yaml_node_t *root = yaml_document_get_root_node(&doc);
  if (!root) {
    set_err(err, errlen, "%s:1: scenario: empty; allowed: a mapping with gpus: [...]", name);
    rc = GS_EPARSE;
  } else {
    rc = parse_root(&c, root, s);
  }
  yaml_document_delete(&doc);
  if (rc == 0) { /* a second document would be silently ignored: reject it */
    yaml_document_t doc2;
    if (!yaml_parser_load(&parser, &doc2)) {
      set_err(err, errlen, "%s:%zu: yaml: %s", name, parser.problem_mark.line + 1,
              parser.problem ? parser.problem : "syntax error");
      rc = GS_EPARSE;
    } else {
      yaml_node_t *r2 = yaml_document_get_root_node(&doc2);
      if (r2) {
        set_err(err, errlen, "%s:%zu: scenario: a second YAML document; allowed: one document",
                name, r2->start_mark.line + 1);
        rc = GS_EPARSE;
      }
      yaml_document_delete(&doc2);
    }
  }
  yaml_parser_delete(&parser);
  if (rc != 0) {
    scenario_free(s);
    return rc;
  }
  *out = s;
  return 0;
}

int scenario_load(const char *path, struct scenario **out, char *err, size_t errlen) {
  char *data = NULL;
  size_t len = 0;
  int rc = read_file(path, SCENARIO_MAX_BYTES, &data, &len, err, errlen);
  if (rc)
    return rc;
  char dir[PATH_MAX_LEN];
  const char *slash = strrchr(path, '/');
  if (!slash) {
    memcpy(dir, ".", 2);
  } else {
    size_t dl = slash == path ? 1 : (size_t)(slash - path);
    if (dl >= sizeof dir) {
      free(data);
      set_err(err, errlen, "%s: path too long", path);
      return GS_EINVAL;
    }
    memcpy(dir, path, dl);
    dir[dl] = '\0';
  }
  rc = scenario_parse(data, len, path, dir, out, err, errlen);
  free(data);
  return rc;
}

int scenario_default(struct scenario **out, char *err, size_t errlen) {
  return scenario_parse(scenario_default_yaml, sizeof scenario_default_yaml - 1, "<built-in>", NULL,
                        out, err, errlen);
}

void scenario_free(struct scenario *s) {
  if (!s)
    return;
  for (size_t i = 0; i < s->ngpus; i++)
    for (int f = 0; f < GF__COUNT; f++)
      free(s->gpus[i].metric[f].points);
  free(s);
}

/* ---- evaluation ---- */

int scenario_eval(const struct scenario *s, size_t gpu, enum gpu_field f, double t, double *out) {
  if (!s || gpu >= s->ngpus)
    return GS_ENOTFOUND;
  if (f < 0 || f >= GF__COUNT)
    return GS_ENOTSUP;
  if (!(t >= 0)) /* also NaN */
    t = 0;
  const struct scenario_gpu *g = &s->gpus[gpu];
  double used;
  switch (f) {
  case GF_MEM_TOTAL_MIB: *out = g->memory_total_mib; return 0;
  case GF_MEM_FREE_MIB:
  case GF_MEM_USED_PCT:
    if (!(g->present & GF_BIT(GF_MEM_USED_MIB)))
      return GS_ENOTSUP;
    used = pattern_eval(&g->metric[GF_MEM_USED_MIB], t);
    *out = f == GF_MEM_FREE_MIB ? g->memory_total_mib - used : used / g->memory_total_mib * 100.0;
    return 0;
  default: break;
  }
  if (!(g->present & GF_BIT(f)))
    return GS_ENOTSUP;
  *out = pattern_eval(&g->metric[f], t);
  return 0;
}

int scenario_fill(const struct scenario *s, size_t gpu, double t, struct gpu_sample *out, char *err,
                  size_t errlen) {
  if (!s || gpu >= s->ngpus) {
    set_err(err, errlen, "no GPU %zu in the scenario", gpu);
    return GS_ENOTFOUND;
  }
  const struct scenario_gpu *g = &s->gpus[gpu];
  out->valid = 0;
  if (g->health == GPU_HEALTH_LOST) {
    set_err(err, errlen, "GPU is lost (scenario health: lost)");
    return GS_ELOST;
  }
  if (g->health == GPU_HEALTH_ERROR) {
    set_err(err, errlen, "mock read failed: Unknown Error (scenario health: error)");
    return GS_EIO;
  }
  for (size_t m = 0; m < N_METRICS; m++) {
    enum gpu_field f = metric_defs[m].field;
    double v;
    if (scenario_eval(s, gpu, f, t, &v) != 0)
      continue;
    /* NVML reports whole percents, MiB and degrees, and power in milliwatts. */
    v = f == GF_POWER_W ? round(v * 1000.0) / 1000.0 : round(v);
    sample_set(out, f, v);
  }
  sample_set(out, GF_MEM_TOTAL_MIB, round(g->memory_total_mib));
  if (sample_has(out, GF_MEM_USED_MIB))
    sample_set(out, GF_MEM_FREE_MIB, out->v[GF_MEM_TOTAL_MIB] - out->v[GF_MEM_USED_MIB]);
  sample_derive(out);
  return 0;
}
