/* Shared selections: a small table of (key, stamp, selection) under one mutex. Lookups compare
 * the key's hash first; the table is scanned linearly (it holds the distinct selections of one
 * gateway, hundreds at most) and a put replaces the same key or the oldest stamp. */
#include "keda/selshare.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Keys that only the policy reads, after the selection (keda/scaler.c judge). */
static const char *const judge_only[] = {
    "targetValue",  "activationThreshold", "aggregation",         "metricName",
    "allowPartial", "minCoverage",         "pollIntervalSeconds", "value"};

struct share_entry {
  uint64_t hash, stamp;
  char *key;
  size_t klen;
  struct scaler_selection sel; /* a selection key's */
  bool has_result;             /* a value key's: */
  struct scaler_result result;
};

struct selshare {
  pthread_mutex_t mu;
  struct share_entry e[SELSHARE_ENTRIES];
  size_t n;
};

struct selshare *selshare_new(void) {
  struct selshare *s = calloc(1, sizeof *s);
  if (s)
    pthread_mutex_init(&s->mu, NULL);
  return s;
}

void selshare_clear(struct selshare *s) {
  if (!s)
    return;
  pthread_mutex_lock(&s->mu);
  for (size_t i = 0; i < s->n; i++) {
    free(s->e[i].key);
    scaler_selection_release(&s->e[i].sel);
  }
  s->n = 0;
  pthread_mutex_unlock(&s->mu);
}

void selshare_free(struct selshare *s) {
  if (!s)
    return;
  for (size_t i = 0; i < s->n; i++) {
    free(s->e[i].key);
    scaler_selection_release(&s->e[i].sel);
  }
  pthread_mutex_destroy(&s->mu);
  free(s);
}

/* Keys that change only what is done with the value once judged (keda/scaler.c: the answer's
 * activation, the name and target KEDA is told). */
static const char *const after_value[] = {"targetValue", "activationThreshold", "metricName",
                                          "pollIntervalSeconds"};

static bool listed_in(const char *k, const char *const *list, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(k, list[i]) == 0)
      return true;
  return false;
}

static bool left_out(const char *k, enum selshare_kind kind) {
  if (kind == SELSHARE_VALUE)
    return listed_in(k, after_value, sizeof after_value / sizeof after_value[0]);
  return listed_in(k, judge_only, sizeof judge_only / sizeof judge_only[0]);
}

static bool append(char *key, size_t cap, size_t *len, const char *s) {
  size_t n = strlen(s) + 1; /* with its NUL, so that "a" "bc" and "ab" "c" differ */
  if (*len + n > cap)
    return false;
  memcpy(key + *len, s, n);
  *len += n;
  return true;
}

/* Of a key given more than once, only the last counts (as in trigger_parse, where a NULL value
 * reads as ""): the earlier ones are left out of the key, so that the same trigger written twice
 * over shares. */
static bool repeated_later(const struct kv *md, size_t n, size_t i) {
  for (size_t j = i + 1; j < n; j++)
    if (md[j].key && strcmp(md[j].key, md[i].key) == 0)
      return true;
  return false;
}

size_t selshare_key(const struct kv *md, size_t n, const char *ref_ns, enum selshare_kind kind,
                    char *key, size_t cap) {
  size_t order[64], m = 0;
  if (n > 64)
    return 0;
  for (size_t i = 0; i < n; i++) { /* insertion by key */
    if (!md[i].key || left_out(md[i].key, kind) || repeated_later(md, n, i))
      continue;
    size_t j = m++;
    while (j > 0 && strcmp(md[order[j - 1]].key, md[i].key) > 0) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = i;
  }
  size_t len = 0;
  if (!append(key, cap, &len, kind == SELSHARE_VALUE ? "value" : "selection") ||
      !append(key, cap, &len, ref_ns ? ref_ns : ""))
    return 0;
  for (size_t i = 0; i < m; i++)
    if (!append(key, cap, &len, md[order[i]].key) ||
        !append(key, cap, &len, md[order[i]].value ? md[order[i]].value : "")) /* as parsed */
      return 0;
  return len;
}

static uint64_t hash(const char *k, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)k[i];
    h *= 1099511628211ULL;
  }
  return h;
}

static int copy_sel(struct scaler_selection *dst, const struct scaler_selection *src) {
  *dst = *src;
  dst->vals = NULL;
  dst->group = NULL;
  dst->share = NULL;
  dst->cap = src->n;
  if (src->n == 0)
    return 0;
  dst->vals = malloc(src->n * sizeof *dst->vals);
  dst->group = malloc(src->n * sizeof *dst->group);
  dst->share = malloc(src->n * sizeof *dst->share);
  if (!dst->vals || !dst->group || !dst->share) {
    scaler_selection_release(dst);
    return -1;
  }
  memcpy(dst->vals, src->vals, src->n * sizeof *dst->vals);
  memcpy(dst->group, src->group, src->n * sizeof *dst->group);
  memcpy(dst->share, src->share, src->n * sizeof *dst->share);
  return 0;
}

static struct share_entry *find(struct selshare *s, uint64_t h, const char *key, size_t klen) {
  for (size_t i = 0; i < s->n; i++)
    if (s->e[i].hash == h && s->e[i].klen == klen && memcmp(s->e[i].key, key, klen) == 0)
      return &s->e[i];
  return NULL;
}

bool selshare_get(struct selshare *s, const char *key, size_t klen, uint64_t stamp,
                  struct scaler_selection *out) {
  if (!s || !klen || !stamp)
    return false;
  uint64_t h = hash(key, klen);
  pthread_mutex_lock(&s->mu);
  struct share_entry *e = find(s, h, key, klen);
  bool hit = e && e->stamp == stamp && copy_sel(out, &e->sel) == 0;
  pthread_mutex_unlock(&s->mu);
  return hit;
}

static void put(struct selshare *s, const char *key, size_t klen, uint64_t stamp,
                const struct scaler_selection *sel, const struct scaler_result *r) {
  struct scaler_selection copy;
  if (copy_sel(&copy, sel) != 0)
    return;
  uint64_t h = hash(key, klen);
  char *k = NULL;
  pthread_mutex_lock(&s->mu);
  struct share_entry *e = find(s, h, key, klen);
  if (e && e->stamp > stamp) { /* a later selection is there already */
    pthread_mutex_unlock(&s->mu);
    scaler_selection_release(&copy);
    return;
  }
  if (!e) {
    k = malloc(klen);
    if (!k) {
      pthread_mutex_unlock(&s->mu);
      scaler_selection_release(&copy);
      return;
    }
    memcpy(k, key, klen);
    if (s->n < SELSHARE_ENTRIES) {
      e = &s->e[s->n++];
    } else {
      e = &s->e[0];
      for (size_t i = 1; i < s->n; i++)
        if (s->e[i].stamp < e->stamp)
          e = &s->e[i];
      free(e->key);
      scaler_selection_release(&e->sel);
    }
    e->key = k;
    e->klen = klen;
    e->hash = h;
  } else {
    scaler_selection_release(&e->sel);
  }
  e->stamp = stamp;
  e->sel = copy;
  e->has_result = r != NULL;
  if (r)
    e->result = *r;
  pthread_mutex_unlock(&s->mu);
}
void selshare_put(struct selshare *s, const char *key, size_t klen, uint64_t stamp,
                  const struct scaler_selection *sel) {
  /* A selection with notes (what is stale or unknown, with ages) is made again each time, so
   * that its messages stay current: only complete, quiet selections are shared. */
  if (!s || !klen || !stamp || sel->missing[0] || sel->missing_cut)
    return;
  put(s, key, klen, stamp, sel, NULL);
}

bool selshare_value_get(struct selshare *s, const char *key, size_t klen, uint64_t stamp,
                        struct scaler_result *out) {
  if (!s || !klen || !stamp)
    return false;
  uint64_t h = hash(key, klen);
  pthread_mutex_lock(&s->mu);
  struct share_entry *e = find(s, h, key, klen);
  bool hit = e && e->stamp == stamp && e->has_result;
  if (hit)
    *out = e->result;
  pthread_mutex_unlock(&s->mu);
  return hit;
}

void selshare_value_put(struct selshare *s, const char *key, size_t klen, uint64_t stamp,
                        const struct scaler_result *r) {
  struct scaler_selection none;
  memset(&none, 0, sizeof none);
  if (!s || !klen || !stamp)
    return;
  put(s, key, klen, stamp, &none, r);
}
