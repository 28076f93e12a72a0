/* Per-agent parts of plain cluster selections: one table per field, an array by visit position. */
#include "gateway/memo.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct gwmemo_sel {
  pthread_mutex_t mu;
  struct gwmemo_part *parts;
  size_t cap;
  uint64_t hits;
};

struct gwmemo {
  pthread_mutex_t mu; /* guards field[] being made */
  struct gwmemo_sel *field[GF__COUNT];
};

struct gwmemo *gwmemo_new(void) {
  struct gwmemo *m = calloc(1, sizeof *m);
  if (m)
    pthread_mutex_init(&m->mu, NULL);
  return m;
}

void gwmemo_free(struct gwmemo *m) {
  if (!m)
    return;
  for (size_t f = 0; f < GF__COUNT; f++) {
    struct gwmemo_sel *s = m->field[f];
    if (!s)
      continue;
    for (size_t i = 0; i < s->cap; i++)
      free(s->parts[i].vals);
    free(s->parts);
    pthread_mutex_destroy(&s->mu);
    free(s);
  }
  pthread_mutex_destroy(&m->mu);
  free(m);
}

struct gwmemo_sel *gwmemo_begin(struct gwmemo *m, enum gpu_field f) {
  if (!m || (unsigned)f >= GF__COUNT)
    return NULL;
  pthread_mutex_lock(&m->mu);
  struct gwmemo_sel *s = m->field[f];
  if (!s && (s = calloc(1, sizeof *s)) != NULL) {
    pthread_mutex_init(&s->mu, NULL);
    m->field[f] = s;
  }
  pthread_mutex_unlock(&m->mu);
  if (s)
    pthread_mutex_lock(&s->mu);
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
  for (size_t f = 0; m && f < GF__COUNT; f++) {
    struct gwmemo_sel *s = gwmemo_begin(m, (enum gpu_field)f);
    if (s)
      n += s->hits;
    gwmemo_end(s);
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
  if (p->n > d->n || !d->vals) {
    double *v = realloc(d->vals, (p->n ? p->n : 1) * sizeof *v);
    if (!v) {
      d->version = 0;
      return;
    }
    d->vals = v;
  }
  double *vals = d->vals;
  *d = *p;
  d->vals = vals;
  if (p->n)
    memcpy(d->vals, p->vals, p->n * sizeof *p->vals);
}
