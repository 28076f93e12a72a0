/* Parsed triggers by metadata: a hash table with an LRU list under one mutex, entries held by
 * reference count so that an eviction never frees regexes another thread is matching with. */
#include "keda/trigger_cache.h"

#include "keda/selshare.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct trigger_cache_entry {
  struct trigger_cache_entry *hnext;       /* bucket chain */
  struct trigger_cache_entry *prev, *next; /* LRU list, most recent first */
  uint64_t hash;
  int refs;            /* holds + 1 while in the table */
  bool live;           /* in the table */
  uint64_t memo_stamp; /* the kept answer's stamp (0: none) */
  bool memo_active;
  struct trigger t;
  size_t klen;
  unsigned char key[];
};

struct trigger_cache {
  pthread_mutex_t mu;
  struct trigger_cache_entry **buckets;
  size_t nbuckets; /* a power of two */
  size_t n, max;
  struct trigger_cache_entry lru; /* list head */
  unsigned long long hits, misses, evictions, memo_hits, memo_misses;
  uint64_t (*stamp)(void *ud, const struct trigger *t);
  void *stamp_ud;
  struct selshare *shared; /* with a stamp function: selections shared between triggers */
};

struct trigger_cache *trigger_cache_new(int max_entries) {
  struct trigger_cache *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  c->max = max_entries > 0 ? (size_t)max_entries : TRIGGER_CACHE_DEFAULT_ENTRIES;
  c->nbuckets = 16;
  while (c->nbuckets < 2 * c->max)
    c->nbuckets *= 2;
  c->buckets = calloc(c->nbuckets, sizeof *c->buckets);
  if (!c->buckets) {
    free(c);
    return NULL;
  }
  c->lru.prev = c->lru.next = &c->lru;
  pthread_mutex_init(&c->mu, NULL);
  return c;
}

static void entry_free(struct trigger_cache_entry *e) {
  trigger_free(&e->t);
  free(e);
}

/* Takes e out of the table and the LRU list; returns true when the caller must free it (no
 * hold left). Under c->mu. */
static bool unlink_locked(struct trigger_cache *c, struct trigger_cache_entry *e) {
  struct trigger_cache_entry **pp = &c->buckets[e->hash & (c->nbuckets - 1)];
  while (*pp && *pp != e)
    pp = &(*pp)->hnext;
  if (*pp)
    *pp = e->hnext;
  e->prev->next = e->next;
  e->next->prev = e->prev;
  e->live = false;
  c->n--;
  return --e->refs == 0;
}

void trigger_cache_clear(struct trigger_cache *c) {
  if (!c)
    return;
  selshare_clear(c->shared); /* the shared selections and values were made with them */
  pthread_mutex_lock(&c->mu);
  struct trigger_cache_entry *dead = NULL;
  while (c->lru.next != &c->lru) {
    struct trigger_cache_entry *e = c->lru.next;
    if (unlink_locked(c, e)) {
      e->hnext = dead;
      dead = e;
    }
  }
  pthread_mutex_unlock(&c->mu);
  while (dead) { /* regfree outside the lock */
    struct trigger_cache_entry *e = dead;
    dead = e->hnext;
    entry_free(e);
  }
}

void trigger_cache_free(struct trigger_cache *c) {
  if (!c)
    return;
  trigger_cache_clear(c);
  selshare_free(c->shared);
  pthread_mutex_destroy(&c->mu);
  free(c->buckets);
  free(c);
}

/* ---- the key ---- */

static unsigned char *put_str(unsigned char *p, const char *s, size_t len) {
  uint32_t l = (uint32_t)len;
  memcpy(p, &l, sizeof l);
  memcpy(p + sizeof l, s, len);
  return p + sizeof l + len;
}

/* Writes the key of (md, ref_ns) into buf (TRIGGER_CACHE_MAX_KEY_BYTES): the namespace, then the
 * pairs sorted by key, stably (pairs of one repeated key keep their order, and the last one
 * counts, as in trigger_parse). Pairs without a key are left out: the parser ignores them.
 * Returns the length, or 0 when over the caps. */
static size_t make_key(const struct kv *md, size_t n, const char *ref_ns, unsigned char *buf) {
  if (n > TRIGGER_CACHE_MAX_KEYS)
    return 0;
  size_t idx[TRIGGER_CACHE_MAX_KEYS], m = 0;
  for (size_t i = 0; i < n; i++) {
    if (!md[i].key)
      continue;
    size_t j = m++;
    while (j > 0 && strcmp(md[idx[j - 1]].key, md[i].key) > 0) { /* insertion sort: stable */
      idx[j] = idx[j - 1];
      j--;
    }
    idx[j] = i;
  }
  const char *ns = ref_ns ? ref_ns : "";
  size_t nslen = strlen(ns), total = sizeof(uint32_t) + nslen;
  if (total > TRIGGER_CACHE_MAX_KEY_BYTES)
    return 0;
  size_t klen[TRIGGER_CACHE_MAX_KEYS], vlen[TRIGGER_CACHE_MAX_KEYS];
  for (size_t j = 0; j < m; j++) {
    const struct kv *p = &md[idx[j]];
    klen[j] = strlen(p->key);
    vlen[j] = p->value ? strlen(p->value) : 0;
    total += 2 * sizeof(uint32_t) + klen[j] + vlen[j];
    if (total > TRIGGER_CACHE_MAX_KEY_BYTES)
      return 0;
  }
  unsigned char *w = put_str(buf, ns, nslen);
  for (size_t j = 0; j < m; j++) {
    const struct kv *p = &md[idx[j]];
    w = put_str(w, p->key, klen[j]);
    w = put_str(w, p->value ? p->value : "", vlen[j]);
  }
  return (size_t)(w - buf);
}

static uint64_t hash_key(const unsigned char *k, size_t len) {
  uint64_t h = 1469598103934665603ULL; /* FNV-1a */
  for (size_t i = 0; i < len; i++) {
    h ^= k[i];
    h *= 1099511628211ULL;
  }
  return h;
}

/* ---- lookups ---- */

static struct trigger_cache_entry *find_locked(struct trigger_cache *c, uint64_t h,
                                               const unsigned char *key, size_t klen) {
  for (struct trigger_cache_entry *e = c->buckets[h & (c->nbuckets - 1)]; e; e = e->hnext)
    if (e->hash == h && e->klen == klen && memcmp(e->key, key, klen) == 0)
      return e;
  return NULL;
}

static void touch_locked(struct trigger_cache *c, struct trigger_cache_entry *e) {
  e->prev->next = e->next;
  e->next->prev = e->prev;
  e->next = c->lru.next;
  e->prev = &c->lru;
  c->lru.next->prev = e;
  c->lru.next = e;
}

struct trigger_cache_entry *trigger_cache_get(struct trigger_cache *c, const struct kv *md,
                                              size_t n, const char *ref_ns, struct trigger *out) {
  if (!c)
    return NULL;
  unsigned char key[TRIGGER_CACHE_MAX_KEY_BYTES];
  size_t klen = make_key(md, n, ref_ns, key);
  if (!klen)
    return NULL;
  uint64_t h = hash_key(key, klen);
  pthread_mutex_lock(&c->mu);
  struct trigger_cache_entry *e = find_locked(c, h, key, klen);
  if (e) {
    e->refs++;
    touch_locked(c, e);
    c->hits++;
  } else {
    c->misses++;
  }
  pthread_mutex_unlock(&c->mu);
  if (e)
    *out = e->t; /* the regexes stay valid while held; nothing else in e changes */
  return e;
}

struct trigger_cache_entry *trigger_cache_put(struct trigger_cache *c, const struct kv *md,
                                              size_t n, const char *ref_ns,
                                              const struct trigger *t) {
  if (!c)
    return NULL;
  unsigned char key[TRIGGER_CACHE_MAX_KEY_BYTES];
  size_t klen = make_key(md, n, ref_ns, key);
  if (!klen)
    return NULL;
  struct trigger_cache_entry *e = malloc(sizeof *e + klen);
  if (!e)
    return NULL;
  memset(e, 0, sizeof *e);
  e->hash = hash_key(key, klen);
  e->klen = klen;
  memcpy(e->key, key, klen);
  e->t = *t;
  e->refs = 2; /* the table + the caller's hold */
  e->live = true;
  struct trigger_cache_entry *dead = NULL, *old;
  pthread_mutex_lock(&c->mu);
  /* Another thread may have parsed the same metadata meanwhile: the newer one replaces it. */
  if ((old = find_locked(c, e->hash, key, klen)) && unlink_locked(c, old)) {
    old->hnext = dead; /* its bucket link is stale now: the dead list reuses it */
    dead = old;
  }
  while (c->n >= c->max) {
    struct trigger_cache_entry *lru = c->lru.prev;
    c->evictions++;
    if (unlink_locked(c, lru)) {
      lru->hnext = dead;
      dead = lru;
    }
  }
  size_t b = e->hash & (c->nbuckets - 1);
  e->hnext = c->buckets[b];
  c->buckets[b] = e;
  e->next = c->lru.next;
  e->prev = &c->lru;
  c->lru.next->prev = e;
  c->lru.next = e;
  c->n++;
  pthread_mutex_unlock(&c->mu);
  while (dead) {
    struct trigger_cache_entry *d = dead;
    dead = d->hnext;
    entry_free(d);
  }
  return e;
}

void trigger_cache_release(struct trigger_cache *c, struct trigger_cache_entry *e) {
  if (!c || !e)
    return;
  pthread_mutex_lock(&c->mu);
  bool last = --e->refs == 0;
  pthread_mutex_unlock(&c->mu);
  if (last)
    entry_free(e);
}

const struct trigger *trigger_cache_entry_trigger(const struct trigger_cache_entry *e) {
  return &e->t;
}

bool trigger_cache_entry_live(struct trigger_cache *c, const struct trigger_cache_entry *e) {
  pthread_mutex_lock(&c->mu);
  bool live = e->live;
  pthread_mutex_unlock(&c->mu);
  return live;
}

void trigger_cache_stats(struct trigger_cache *c, struct trigger_cache_stats *out) {
  memset(out, 0, sizeof *out);
  if (!c)
    return;
  pthread_mutex_lock(&c->mu);
  out->hits = c->hits;
  out->misses = c->misses;
  out->evictions = c->evictions;
  out->entries = c->n;
  out->memo_hits = c->memo_hits;
  out->memo_misses = c->memo_misses;
  pthread_mutex_unlock(&c->mu);
}

void trigger_cache_set_stamp(struct trigger_cache *c,
                             uint64_t (*stamp)(void *ud, const struct trigger *t), void *ud) {
  if (!c)
    return;
  c->stamp = stamp;
  c->stamp_ud = ud;
  if (stamp && !c->shared)
    c->shared = selshare_new(); /* NULL (out of memory): each trigger selects for itself */
}

struct selshare *trigger_cache_selshare(struct trigger_cache *c) {
  return c ? c->shared : NULL;
}

bool trigger_cache_shares(const struct trigger_cache *c) {
  return c && c->stamp;
}

uint64_t trigger_cache_stamp(struct trigger_cache *c, const struct trigger *t) {
  return c && c->stamp ? c->stamp(c->stamp_ud, t) : 0;
}

bool trigger_cache_memo_get(struct trigger_cache *c, struct trigger_cache_entry *e, uint64_t stamp,
                            bool *active) {
  if (!c || !e || !stamp)
    return false;
  pthread_mutex_lock(&c->mu);
  bool hit = e->memo_stamp == stamp;
  if (hit) {
    *active = e->memo_active;
    c->memo_hits++;
  } else {
    c->memo_misses++;
  }
  pthread_mutex_unlock(&c->mu);
  return hit;
}

void trigger_cache_memo_put(struct trigger_cache *c, struct trigger_cache_entry *e, uint64_t stamp,
                            bool active) {
  if (!c || !e || !stamp)
    return;
  pthread_mutex_lock(&c->mu);
  if (stamp >= e->memo_stamp) { /* an evaluation that began earlier never replaces a later one */
    e->memo_stamp = stamp;
    e->memo_active = active;
  }
  pthread_mutex_unlock(&c->mu);
}
