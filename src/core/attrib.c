/* The pod attribution table: a sorted array of (device uuid, pods) swapped whole under a lock, so
 * readers always see one complete kubelet answer, never a mix of two. */
#include "core/attrib.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

struct attrib {
  pthread_mutex_t lock;
  struct attrib_entry *entries; /* sorted by uuid; owned */
  size_t n;
  bool available;
};

struct attrib *attrib_new(void) {
  struct attrib *a = calloc(1, sizeof *a);
  if (!a)
    return NULL;
  if (pthread_mutex_init(&a->lock, NULL) != 0) {
    free(a);
    return NULL;
  }
  return a;
}

void attrib_entries_free(struct attrib_entry *e, size_t n) {
  for (size_t i = 0; e && i < n; i++)
    free(e[i].k8s);
  free(e);
}

void attrib_free(struct attrib *a) {
  if (!a)
    return;
  pthread_mutex_destroy(&a->lock);
  attrib_entries_free(a->entries, a->n);
  free(a);
}

/* A copy of n k8s entries, or NULL (none, or out of memory: then the labels are left out). */
static struct attrib_k8s *k8s_copy(const struct attrib_k8s *d, size_t n) {
  if (!d || n == 0)
    return NULL;
  struct attrib_k8s *c = malloc(n * sizeof *c);
  if (c)
    memcpy(c, d, n * sizeof *c);
  return c;
}

static int cmp_entry(const void *x, const void *y) {
  const struct attrib_entry *a = x, *b = y;
  return strcmp(a->uuid, b->uuid);
}

static int cmp_key(const void *key, const void *e) {
  return strcmp(key, ((const struct attrib_entry *)e)->uuid);
}

static bool same_pods(const struct gpu_pods *x, const struct gpu_pods *y) {
  if (x->n != y->n || x->total != y->total)
    return false;
  for (size_t i = 0; i < x->n && i < ATTRIB_MAX_PODS; i++)
    if (strcmp(x->pods[i].ns, y->pods[i].ns) != 0 || strcmp(x->pods[i].pod, y->pods[i].pod) != 0 ||
        strcmp(x->pods[i].container, y->pods[i].container) != 0)
      return false;
  return true;
}

/* Copies the per-process values of src's listed containers into dst (same pods), allocating dst's
 * k8s array when it has none. */
static void copy_values(struct attrib_entry *dst, const struct attrib_entry *src) {
  size_t np = dst->pods.n < ATTRIB_MAX_PODS ? dst->pods.n : ATTRIB_MAX_PODS;
  if (!src->k8s || np == 0)
    return;
  if (!dst->k8s && !(dst->k8s = calloc(np, sizeof *dst->k8s)))
    return; /* out of memory: no values until the next pass, never made-up ones */
  for (size_t i = 0; i < np; i++) {
    struct attrib_k8s *d = &dst->k8s[i];
    const struct attrib_k8s *o = &src->k8s[i];
    d->has_util = o->has_util;
    d->has_fb = o->has_fb;
    d->util = o->util;
    d->fb_mib = o->fb_mib;
    if (!d->pod_uid[0])
      memcpy(d->pod_uid, o->pod_uid, sizeof d->pod_uid);
  }
}

static void copy_split(struct gpu_pods *dst, const struct gpu_pods *src) {
  for (size_t i = 0; i < dst->n && i < ATTRIB_MAX_PODS; i++)
    dst->pods[i].share = src->pods[i].share;
  dst->holders = src->holders;
  dst->split = src->split;
}

int attrib_replace(struct attrib *a, const struct attrib_entry *entries, size_t n) {
  struct attrib_entry *copy = NULL;
  if (n) {
    copy = malloc(n * sizeof *copy);
    if (!copy)
      return GS_ENOMEM;
    memcpy(copy, entries, n * sizeof *copy);
    for (size_t i = 0; i < n; i++) {
      size_t np = copy[i].pods.n < ATTRIB_MAX_PODS ? copy[i].pods.n : ATTRIB_MAX_PODS;
      copy[i].k8s = k8s_copy(entries[i].k8s, np);
      if (entries[i].k8s && np && !copy[i].k8s) {
        attrib_entries_free(copy, i);
        return GS_ENOMEM;
      }
      copy[i].uuid[sizeof copy[i].uuid - 1] = '\0';
      if (copy[i].pods.split == ATTRIB_SPLIT_NONE)
        attrib_split_even(&copy[i].pods);
    }
    qsort(copy, n, sizeof *copy, cmp_entry);
  }
  pthread_mutex_lock(&a->lock);
  struct attrib_entry *old = a->entries;
  for (size_t i = 0; i < n && a->n; i++) {
    const struct attrib_entry *e = bsearch(copy[i].uuid, old, a->n, sizeof *old, cmp_key);
    if (!e || !same_pods(&e->pods, &copy[i].pods))
      continue;
    copy_values(&copy[i], e); /* the process split's values stand until its next pass */
    if (copy[i].pods.split == ATTRIB_SPLIT_EVEN && e->pods.split == ATTRIB_SPLIT_PROCESS)
      copy_split(&copy[i].pods, &e->pods);
  }
  size_t nold = a->n;
  a->entries = copy;
  a->n = n;
  a->available = true;
  pthread_mutex_unlock(&a->lock);
  attrib_entries_free(old, nold);
  return 0;
}

int attrib_set_split(struct attrib *a, const char *uuid, const struct gpu_pods *p) {
  int rc = GS_ENOTFOUND;
  pthread_mutex_lock(&a->lock);
  struct attrib_entry *e =
      a->n && uuid ? bsearch(uuid, a->entries, a->n, sizeof *a->entries, cmp_key) : NULL;
  if (e && same_pods(&e->pods, p)) {
    copy_split(&e->pods, p);
    rc = 0;
  }
  pthread_mutex_unlock(&a->lock);
  return rc;
}

int attrib_set_values(struct attrib *a, const char *uuid, const struct gpu_pods *p,
                      const struct attrib_value *v) {
  int rc = GS_ENOTFOUND;
  pthread_mutex_lock(&a->lock);
  struct attrib_entry *e =
      a->n && uuid ? bsearch(uuid, a->entries, a->n, sizeof *a->entries, cmp_key) : NULL;
  size_t np = e ? (e->pods.n < ATTRIB_MAX_PODS ? e->pods.n : ATTRIB_MAX_PODS) : 0;
  if (e && same_pods(&e->pods, p) && np) {
    rc = 0;
    if (!e->k8s && v && !(e->k8s = calloc(np, sizeof *e->k8s)))
      rc = GS_ENOMEM;
    for (size_t i = 0; !rc && e->k8s && i < np; i++) {
      struct attrib_k8s *d = &e->k8s[i];
      d->has_util = v && v[i].has_util;
      d->has_fb = v && v[i].has_fb;
      d->util = v ? v[i].util : 0;
      d->fb_mib = v ? v[i].fb_mib : 0;
      if (v && v[i].pod_uid[0] && !d->pod_uid[0])
        memcpy(d->pod_uid, v[i].pod_uid, sizeof d->pod_uid);
    }
  }
  pthread_mutex_unlock(&a->lock);
  return rc;
}

void attrib_clear(struct attrib *a) {
  pthread_mutex_lock(&a->lock);
  struct attrib_entry *old = a->entries;
  size_t nold = a->n;
  a->entries = NULL;
  a->n = 0;
  a->available = false;
  pthread_mutex_unlock(&a->lock);
  attrib_entries_free(old, nold);
}

bool attrib_lookup(struct attrib *a, const char *uuid, struct gpu_pods *out) {
  memset(out, 0, sizeof *out);
  if (!uuid)
    return false;
  bool found = false;
  pthread_mutex_lock(&a->lock);
  const struct attrib_entry *e =
      a->n ? bsearch(uuid, a->entries, a->n, sizeof *a->entries, cmp_key) : NULL;
  if (e && e->pods.n > 0) {
    *out = e->pods;
    found = true;
  }
  pthread_mutex_unlock(&a->lock);
  return found;
}

bool attrib_lookup_k8s(struct attrib *a, const char *uuid, struct gpu_pods *out,
                       struct attrib_k8s **k8s) {
  memset(out, 0, sizeof *out);
  *k8s = NULL;
  if (!uuid)
    return false;
  bool found = false;
  pthread_mutex_lock(&a->lock);
  const struct attrib_entry *e =
      a->n ? bsearch(uuid, a->entries, a->n, sizeof *a->entries, cmp_key) : NULL;
  if (e && e->pods.n > 0) {
    *out = e->pods;
    *k8s = k8s_copy(e->k8s, e->pods.n < ATTRIB_MAX_PODS ? e->pods.n : ATTRIB_MAX_PODS);
    found = true;
  }
  pthread_mutex_unlock(&a->lock);
  return found;
}

bool attrib_available(struct attrib *a) {
  pthread_mutex_lock(&a->lock);
  bool v = a->available;
  pthread_mutex_unlock(&a->lock);
  return v;
}

uint64_t attrib_group_of(const char *ns, const char *key) {
  if (!key || !key[0])
    return 0;
  uint64_t h = UINT64_C(14695981039346656037); /* FNV-1a 64 */
  for (int part = 0; part < 3; part++) {
    const char *s = part == 0 ? (ns ? ns : "") : part == 1 ? "/" : key;
    for (; *s; s++) {
      h ^= (unsigned char)*s;
      h *= UINT64_C(1099511628211);
    }
  }
  return h ? h : 1;
}

const char *attrib_split_name(enum attrib_split s) {
  switch (s) {
  case ATTRIB_SPLIT_EVEN: return "even";
  case ATTRIB_SPLIT_PROCESS: return "process";
  default: return "none";
  }
}

static bool same_pod(const struct pod_ref *a, const struct pod_ref *b) {
  return strcmp(a->pod, b->pod) == 0 && strcmp(a->ns, b->ns) == 0;
}

size_t attrib_holders(const struct gpu_pods *p) {
  if (p->holders)
    return p->holders;
  size_t n = p->n < ATTRIB_MAX_PODS ? p->n : ATTRIB_MAX_PODS, distinct = 0;
  for (size_t i = 0; i < n; i++) {
    bool seen = false; /* listed entries need not be sorted here: compare with all before */
    for (size_t j = 0; j < i && !seen; j++)
      seen = same_pod(&p->pods[j], &p->pods[i]);
    distinct += !seen;
  }
  return distinct + (p->total > n ? p->total - n : 0);
}

void attrib_split_even(struct gpu_pods *p) {
  size_t n = p->n < ATTRIB_MAX_PODS ? p->n : ATTRIB_MAX_PODS;
  if (n == 0)
    return;
  size_t h = attrib_holders(p);
  for (size_t i = 0; i < n; i++)
    p->pods[i].share = 1.0 / (double)h;
  p->holders = h;
  p->split = ATTRIB_SPLIT_EVEN;
}

double attrib_pod_share(const struct gpu_pods *p, size_t i) {
  if (p->split != ATTRIB_SPLIT_NONE)
    return p->pods[i].share;
  size_t h = attrib_holders(p);
  return h ? 1.0 / (double)h : 0;
}

int attrib_split_process(struct gpu_pods *p, const struct attrib_use *use, size_t n) {
  double total = 0;
  for (size_t k = 0; k < n; k++) {
    if (!isfinite(use[k].util) || use[k].util < 0)
      return GS_EINVAL;
    total += use[k].util;
  }
  size_t listed = p->n < ATTRIB_MAX_PODS ? p->n : ATTRIB_MAX_PODS;
  if (!(total > 0) || listed == 0)
    return GS_ENOTFOUND;
  for (size_t i = 0; i < listed; i++) {
    double mine = 0;
    for (size_t k = 0; k < n; k++)
      if (use[k].pod && use[k].ns && strcmp(use[k].pod, p->pods[i].pod) == 0 &&
          strcmp(use[k].ns, p->pods[i].ns) == 0)
        mine += use[k].util;
    p->pods[i].share = mine / total;
  }
  if (!p->holders)
    p->holders = attrib_holders(p);
  p->split = ATTRIB_SPLIT_PROCESS;
  return 0;
}
