/* Per-agent parts of selections: a small table of selection keys, each with an array of parts by
 * visit position. */
#include "gateway/memo.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct gwmemo_sel {
  pthread_mutex_t mu; /* held by the selection using it; guards parts, cap and hits */
  char *key;          /* NULL: a free slot. Written under both locks, read under either */
  uint64_t used;      /* the table's clock at its last gwmemo_begin (the table's lock) */
  struct gwmemo_part *parts;
  size_t cap;
  uint64_t hits;
};

struct gwmemo {
  pthread_mutex_t mu; /* guards the keys (with each slot's), used and clock */
  uint64_t clock;
  struct gwmemo_sel sel[GWMEMO_KEYS];
};

static void part_free(struct gwmemo_part *p) {
  free(p->vals);
  free(p->lgroup);
  free(p->share);
  memset(p, 0, sizeof *p);
}

static void parts_clear(struct gwmemo_sel *s) {
  for (size_t i = 0; i < s->cap; i++)
    part_free(&s->parts[i]);
  free(s->parts);
  s->parts = NULL;
  s->cap = 0;
}

struct gwmemo *gwmemo_new(void) {
  struct gwmemo *m = calloc(1, sizeof *m);
  if (!m)
    return NULL;
  pthread_mutex_init(&m->mu, NULL);
  for (size_t i = 0; i < GWMEMO_KEYS; i++)
    pthread_mutex_init(&m->sel[i].mu, NULL);
  return m;
}

void gwmemo_free(struct gwmemo *m) {
  if (!m)
    return;
  for (size_t i = 0; i < GWMEMO_KEYS; i++) {
    parts_clear(&m->sel[i]);
    free(m->sel[i].key);
    pthread_mutex_destroy(&m->sel[i].mu);
  }
  pthread_mutex_destroy(&m->mu);
  free(m);
}

struct gwmemo_sel *gwmemo_begin(struct gwmemo *m, const char *key) {
  if (!m || !key)
    return NULL;
  pthread_mutex_lock(&m->mu);
  struct gwmemo_sel *s = NULL, *lru = &m->sel[0];
  for (size_t i = 0; i < GWMEMO_KEYS && !s; i++) {
    struct gwmemo_sel *x = &m->sel[i];
    if (x->key && strcmp(x->key, key) == 0)
      s = x;
    else if (!x->key ? lru->key != NULL : (lru->key && x->used < lru->used))
      lru = x; /* a free slot first, else the least recently used */
  }
  if (!s)
    s = lru;
  s->used = ++m->clock;
  pthread_mutex_unlock(&m->mu);
  pthread_mutex_lock(&s->mu);
  pthread_mutex_lock(&m->mu);
  bool mine = s->key && strcmp(s->key, key) == 0; /* else new, or taken over meanwhile */
  pthread_mutex_unlock(&m->mu);
  if (!mine) {
    parts_clear(s);
    char *k = strdup(key);
    pthread_mutex_lock(&m->mu);
    free(s->key);
    s->key = k;
    pthread_mutex_unlock(&m->mu);
    if (!k) {
      pthread_mutex_unlock(&s->mu);
      return NULL;
    }
  }
  return s;
}

void gwmemo_end(struct gwmemo_sel *s) {
  if (s)
    pthread_mutex_unlock(&s->mu);
}

const struct gwmemo_part *gwmemo_get(struct gwmemo_sel *s, size_t pos, uint64_t version) {
  if (pos >= s->cap || version == 0 || s->parts[pos].version != version)
    return NULL;
  s->hits++;
  return &s->parts[pos];
}

uint64_t gwmemo_hits(struct gwmemo *m) {
  uint64_t n = 0;
  for (size_t i = 0; m && i < GWMEMO_KEYS; i++) {
    pthread_mutex_lock(&m->sel[i].mu);
    n += m->sel[i].hits;
    pthread_mutex_unlock(&m->sel[i].mu);
  }
  return n;
}

void gwmemo_put(struct gwmemo_sel *s, size_t pos, const struct gwmemo_part *p) {
  if (pos >= s->cap) {
    size_t cap = s->cap ? s->cap : 64;
    while (cap <= pos)
      cap *= 2;
    struct gwmemo_part *np = realloc(s->parts, cap * sizeof *np);
    if (!np)
      return;
    memset(np + s->cap, 0, (cap - s->cap) * sizeof *np);
    s->parts = np;
    s->cap = cap;
  }
  struct gwmemo_part *d = &s->parts[pos];
  size_t n = p->n ? p->n : 1;
  double *vals = realloc(d->vals, n * sizeof *vals);
  if (vals)
    d->vals = vals;
  uint32_t *lg = realloc(d->lgroup, n * sizeof *lg);
  if (lg)
    d->lgroup = lg;
  double *sh = realloc(d->share, n * sizeof *sh);
  if (sh)
    d->share = sh;
  if (!vals || !lg || !sh) {
    d->version = 0; /* kept nothing */
    return;
  }
  d->version = p->version;
  d->matched = p->matched;
  d->selected = p->selected;
  d->fresh = p->fresh;
  d->n = p->n;
  d->ngroups = p->ngroups;
  if (p->n) {
    memcpy(d->vals, p->vals, p->n * sizeof *p->vals);
    memcpy(d->lgroup, p->lgroup, p->n * sizeof *p->lgroup);
    memcpy(d->share, p->share, p->n * sizeof *p->share);
  }
}
