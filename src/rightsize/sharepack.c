/* MIG and time-slicing savings from packing the recommended slices of each group onto cards. */
#include "rightsize/sharepack.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "rightsize/migpack.h"

#define DESCRIBE_MATES 4 /* mates named in a description; the rest are counted */

static const struct rs_gpu *rec_gpu0(const struct rs_report *r, const struct rs_rec *c) {
  const struct rs_workload *w = &r->workloads[c->workload_idx];
  return w->n_gpus ? &r->gpus[w->gpus[0]] : NULL;
}

static bool priced(const struct rs_gpu *g) {
  return g && (g->valid & RS_HAS_COST);
}

/* Two recommendations are in one group: same kind, same model, same price (or both unpriced). */
static bool same_group(const struct rs_report *r, const struct rs_rec *a, const struct rs_rec *b) {
  const struct rs_gpu *ga = rec_gpu0(r, a), *gb = rec_gpu0(r, b);
  if (a->kind != b->kind || !ga || !gb || strcmp(ga->model_key, gb->model_key) != 0)
    return false;
  if (priced(ga) != priced(gb))
    return false;
  return !priced(ga) || ga->price.per_gpu_hour == gb->price.per_gpu_hour;
}

struct item {
  size_t rec;  /* index into r->recs */
  size_t slot; /* which of the workload's GPUs */
  unsigned ways;
  size_t card;
  unsigned start;
};

static int cmp_ways(const void *x, const void *y) {
  const struct item *a = x, *b = y;
  if (a->ways != b->ways)
    return a->ways < b->ways ? -1 : 1;
  if (a->rec != b->rec)
    return a->rec < b->rec ? -1 : 1;
  return a->slot < b->slot ? -1 : a->slot > b->slot;
}

/* Time-slicing: a card holds at most as many workloads as the smallest share_ways among them.
 * First fit, fewest ways first. */
static size_t pack_ways(struct item *it, size_t n) {
  qsort(it, n, sizeof(*it), cmp_ways);
  size_t *count = calloc(n + 1, sizeof(size_t));
  unsigned *cap = calloc(n + 1, sizeof(unsigned));
  size_t used = 0;
  if (!count || !cap) {
    free(count);
    free(cap);
    return SIZE_MAX;
  }
  for (size_t i = 0; i < n; i++) {
    size_t c = 0;
    while (c < used && count[c] + 1 > (cap[c] < it[i].ways ? cap[c] : it[i].ways))
      c++;
    if (c == used)
      cap[used++] = it[i].ways;
    count[c]++;
    if (it[i].ways < cap[c])
      cap[c] = it[i].ways;
    it[i].card = c;
    it[i].start = 0;
  }
  free(count);
  free(cap);
  return used;
}

/* MIG: NVIDIA's placements (migpack.c). */
static int pack_mig(const struct rs_report *r, struct item *it, size_t n, size_t *cards) {
  const struct rs_mig_profile **ps = malloc(n * sizeof(*ps));
  struct rs_mig_place *pl = malloc(n * sizeof(*pl));
  int rc = (!ps || !pl) ? GS_ENOMEM : 0;
  for (size_t i = 0; !rc && i < n; i++) {
    const struct rs_rec *c = &r->recs[it[i].rec];
    size_t np = 0;
    const struct rs_mig_profile *mp = rs_mig_profiles(rec_gpu0(r, c)->model_key, &np);
    ps[i] = NULL;
    for (size_t k = 0; k < np; k++)
      if (!strcmp(mp[k].name, c->mig_profile))
        ps[i] = &mp[k];
    if (!ps[i])
      rc = GS_EINVAL; /* a recommendation names a profile its model does not have */
  }
  if (!rc)
    rc = rs_mig_pack(ps, n, pl, cards);
  for (size_t i = 0; !rc && i < n; i++) {
    it[i].card = pl[i].card;
    it[i].start = pl[i].start;
  }
  free(ps);
  free(pl);
  return rc;
}

static int push_mate(struct rs_rec *c, size_t w) {
  if (w == c->workload_idx)
    return 0;
  for (size_t i = 0; i < c->n_mates; i++)
    if (c->mates[i] == w)
      return 0;
  size_t *m = realloc(c->mates, (c->n_mates + 1) * sizeof(*m));
  if (!m)
    return GS_ENOMEM;
  m[c->n_mates++] = w;
  c->mates = m;
  return 0;
}

static int pack_group(struct rs_report *r, const size_t *recs, size_t n_recs, const char *label) {
  size_t n = 0;
  for (size_t i = 0; i < n_recs; i++)
    n += r->workloads[r->recs[recs[i]].workload_idx].n_gpus;
  struct item *it = calloc(n + 1, sizeof(*it));
  size_t *per_card = calloc(n + 1, sizeof(size_t));
  int rc = (!it || !per_card) ? GS_ENOMEM : 0;
  size_t k = 0, cards = 0;
  for (size_t i = 0; !rc && i < n_recs; i++) {
    struct rs_rec *c = &r->recs[recs[i]];
    size_t g = r->workloads[c->workload_idx].n_gpus;
    free(c->slots);
    c->slots = calloc(g ? g : 1, sizeof(*c->slots));
    c->n_slots = 0;
    if (!c->slots)
      rc = GS_ENOMEM;
    for (size_t j = 0; j < g; j++)
      it[k++] = (struct item){recs[i], j, c->share_ways, 0, 0};
  }
  if (!rc && r->recs[recs[0]].kind == RS_REC_MIG)
    rc = pack_mig(r, it, n, &cards);
  else if (!rc && (cards = pack_ways(it, n)) == SIZE_MAX)
    rc = GS_ENOMEM;
  for (size_t i = 0; !rc && i < n; i++)
    per_card[it[i].card]++;
  for (size_t i = 0; !rc && i < n; i++) {
    struct rs_rec *c = &r->recs[it[i].rec];
    struct rs_pack_slot *s = &c->slots[c->n_slots++];
    s->card = it[i].card;
    s->start = it[i].start;
    if (c->kind == RS_REC_MIG) {
      size_t np = 0;
      const struct rs_mig_profile *mp = rs_mig_profiles(rec_gpu0(r, c)->model_key, &np);
      for (size_t q = 0; q < np; q++)
        if (!strcmp(mp[q].name, c->mig_profile))
          s->mem_slices = mp[q].mem_slices;
    }
    size_t m = per_card[it[i].card];
    c->pack_gpus_freed += (double)(m - 1) / (double)m;
    c->pack_shared |= m > 1;
    for (size_t j = 0; !rc && j < n; j++)
      if (j != i && it[j].card == it[i].card)
        rc = push_mate(c, r->recs[it[j].rec].workload_idx);
  }
  for (size_t i = 0; !rc && i < n_recs; i++) {
    struct rs_rec *c = &r->recs[recs[i]];
    snprintf(c->pack_group, sizeof(c->pack_group), "%s", label);
    c->pack_gpus_before = n;
    c->pack_gpus_after = cards;
    const struct rs_gpu *g0 = rec_gpu0(r, c);
    if (priced(g0)) {
      c->savings_month = c->pack_gpus_freed * g0->price.per_gpu_hour * RS_HOURS_PER_MONTH;
      c->valid |= RS_REC_HAS_SAVINGS;
    } else {
      c->valid &= ~(unsigned)RS_REC_HAS_SAVINGS;
    }
  }
  free(it);
  free(per_card);
  return rc;
}

int rs_share_pack(struct rs_report *r) {
  bool *done = calloc(r->n_recs + 1, sizeof(bool));
  size_t *grp = calloc(r->n_recs + 1, sizeof(size_t));
  int rc = (!done || !grp) ? GS_ENOMEM : 0;
  for (size_t i = 0; !rc && i < r->n_recs; i++) {
    const struct rs_rec *c = &r->recs[i];
    if (done[i] || (c->kind != RS_REC_MIG && c->kind != RS_REC_TIMESLICE) || !rec_gpu0(r, c))
      continue;
    size_t n = 0;
    bool other_price = false;
    for (size_t j = i; j < r->n_recs; j++) {
      const struct rs_rec *d = &r->recs[j];
      if (done[j] || !rec_gpu0(r, d))
        continue;
      if (same_group(r, c, d)) {
        grp[n++] = j;
        done[j] = true;
      }
    }
    for (size_t j = 0; j < r->n_recs; j++) {
      const struct rs_rec *d = &r->recs[j];
      other_price |= d->kind == c->kind && rec_gpu0(r, d) && !same_group(r, c, d) &&
                     !strcmp(rec_gpu0(r, d)->model_key, rec_gpu0(r, c)->model_key);
    }
    const struct rs_gpu *g0 = rec_gpu0(r, c);
    char label[RS_SHORT_MAX];
    if (!other_price)
      snprintf(label, sizeof(label), "%s", g0->model_key);
    else if (priced(g0))
      snprintf(label, sizeof(label), "%.30s at %.4g/GPU-h", g0->model_key, g0->price.per_gpu_hour);
    else
      snprintf(label, sizeof(label), "%.30s (unpriced)", g0->model_key);
    rc = pack_group(r, grp, n, label);
  }
  free(done);
  free(grp);
  return rc;
}

static void add(char *out, size_t len, size_t *off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add(char *out, size_t len, size_t *off, const char *fmt, ...) {
  if (*off + 1 >= len)
    return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(out + *off, len - *off, fmt, ap);
  va_end(ap);
  if (w > 0)
    *off = (size_t)w < len - *off ? *off + (size_t)w : len - 1;
}

void rs_pack_describe(const struct rs_report *r, const struct rs_rec *c, char *out, size_t len) {
  out[0] = '\0';
  if ((c->kind != RS_REC_MIG && c->kind != RS_REC_TIMESLICE) || !c->n_slots || len == 0)
    return;
  size_t off = 0;
  for (size_t i = 0; i < c->n_slots; i++) {
    if (c->kind == RS_REC_MIG)
      add(out, len, &off, "%scard %zu (%s at memory slice %u)", i ? ", " : "", c->slots[i].card + 1,
          c->mig_profile, c->slots[i].start);
    else
      add(out, len, &off, "%scard %zu", i ? ", " : "", c->slots[i].card + 1);
  }
  if (!c->pack_shared) {
    add(out, len, &off, " alone: frees nothing until another workload shares the card");
  } else {
    add(out, len, &off, c->n_mates ? " with " : " (its own slices share a card)");
    for (size_t i = 0; i < c->n_mates && i < DESCRIBE_MATES; i++) {
      const struct rs_workload *m = &r->workloads[c->mates[i]];
      add(out, len, &off, "%s%.60s/%.80s", i ? ", " : "", m->namespace_, m->pod);
    }
    if (c->n_mates > DESCRIBE_MATES)
      add(out, len, &off, " and %zu more", c->n_mates - DESCRIBE_MATES);
    add(out, len, &off, ": frees %.2f GPU", c->pack_gpus_freed);
  }
  add(out, len, &off, "; %s: %zu GPU(s) pack onto %zu card(s)", c->pack_group, c->pack_gpus_before,
      c->pack_gpus_after);
}
