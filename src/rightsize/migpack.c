/* MIG profiles with their placements, and the first-fit-decreasing packer (see migpack.h). */
#include "rightsize/migpack.h"

#include <stdlib.h>
#include <string.h>

#include "core/err.h"

/* Start masks from `nvidia-smi mig -lgipp` (MIG user guide, "Getting Started with MIG"):
 * ID 19 {0,1,2,3,4,5,6}:1, ID 15 {0,2,4,6}:2, ID 14 {0,2,4}:2, ID 9 {0,4}:4, ID 5 {0}:4,
 * ID 0 {0}:8. */
#define S_1G 0x7Fu   /* 0..6 */
#define S_1GL 0x55u  /* 0, 2, 4, 6 */
#define S_2G 0x15u   /* 0, 2, 4 */
#define S_3G 0x11u   /* 0, 4 */
#define S_4G7G 0x01u /* 0 */

static const struct rs_mig_profile mig_a100_40[] = {
    {"1g.5gb", 1, 5, 7, 19, 1, S_1G},    {"1g.10gb", 1, 10, 4, 15, 2, S_1GL},
    {"2g.10gb", 2, 10, 3, 14, 2, S_2G},  {"3g.20gb", 3, 20, 2, 9, 4, S_3G},
    {"4g.20gb", 4, 20, 1, 5, 4, S_4G7G}, {"7g.40gb", 7, 40, 1, 0, 8, S_4G7G},
};
static const struct rs_mig_profile mig_80[] = {
    {"1g.10gb", 1, 10, 7, 19, 1, S_1G},  {"1g.20gb", 1, 20, 4, 15, 2, S_1GL},
    {"2g.20gb", 2, 20, 3, 14, 2, S_2G},  {"3g.40gb", 3, 40, 2, 9, 4, S_3G},
    {"4g.40gb", 4, 40, 1, 5, 4, S_4G7G}, {"7g.80gb", 7, 80, 1, 0, 8, S_4G7G},
};
static const struct rs_mig_profile mig_h200[] = {
    {"1g.18gb", 1, 18, 7, 19, 1, S_1G},  {"1g.35gb", 1, 35, 4, 15, 2, S_1GL},
    {"2g.35gb", 2, 35, 3, 14, 2, S_2G},  {"3g.71gb", 3, 71, 2, 9, 4, S_3G},
    {"4g.71gb", 4, 71, 1, 5, 4, S_4G7G}, {"7g.141gb", 7, 141, 1, 0, 8, S_4G7G},
};

const struct rs_mig_profile *rs_mig_profiles(const char *key, size_t *n) {
  *n = 6;
  if (key && !strcmp(key, "A100-40GB"))
    return mig_a100_40;
  if (key && (!strcmp(key, "A100-80GB") || !strcmp(key, "H100-80GB")))
    return mig_80;
  if (key && !strcmp(key, "H200-141GB"))
    return mig_h200;
  *n = 0;
  return NULL;
}

static unsigned span(const struct rs_mig_profile *p, unsigned start) {
  return ((1u << p->mem_slices) - 1u) << start;
}

bool rs_mig_fits(const struct rs_mig_card *c, const struct rs_mig_profile *p, unsigned start) {
  if (start >= RS_MIG_MEM_SLICES || !((p->starts >> start) & 1u) ||
      start + p->mem_slices > RS_MIG_MEM_SLICES)
    return false;
  return (c->mask & span(p, start)) == 0 && c->sevenths + p->sevenths <= RS_MIG_COMPUTE;
}

struct order {
  const struct rs_mig_profile *p;
  size_t i;
};

static int cmp_order(const void *x, const void *y) {
  const struct order *a = x, *b = y;
  if (a->p->mem_slices != b->p->mem_slices)
    return a->p->mem_slices > b->p->mem_slices ? -1 : 1;
  if (a->p->sevenths != b->p->sevenths)
    return a->p->sevenths > b->p->sevenths ? -1 : 1;
  return a->i < b->i ? -1 : a->i > b->i; /* stable: the caller's order breaks ties */
}

/* The highest valid free start of p on c, or -1. */
static int place_on(const struct rs_mig_card *c, const struct rs_mig_profile *p) {
  for (int s = RS_MIG_MEM_SLICES - 1; s >= 0; s--)
    if (rs_mig_fits(c, p, (unsigned)s))
      return s;
  return -1;
}

int rs_mig_pack(const struct rs_mig_profile *const *items, size_t n, struct rs_mig_place *out,
                size_t *n_cards) {
  *n_cards = 0;
  if (n == 0)
    return 0;
  struct order *ord = malloc(n * sizeof(*ord));
  struct rs_mig_card *cards = calloc(n, sizeof(*cards)); /* at most one card per slice */
  if (!ord || !cards) {
    free(ord);
    free(cards);
    return GS_ENOMEM;
  }
  int rc = 0;
  for (size_t i = 0; i < n; i++)
    ord[i] = (struct order){items[i], i};
  qsort(ord, n, sizeof(*ord), cmp_order);
  size_t used = 0;
  for (size_t k = 0; k < n && !rc; k++) {
    const struct rs_mig_profile *p = ord[k].p;
    size_t c = 0;
    int s = -1;
    for (; c < used; c++)
      if ((s = place_on(&cards[c], p)) >= 0)
        break;
    if (c == used) {
      struct rs_mig_card empty = {0, 0};
      if ((s = place_on(&empty, p)) < 0) {
        rc = GS_EINVAL; /* no valid start at all: a broken table */
        break;
      }
      used++;
    }
    cards[c].mask |= span(p, (unsigned)s);
    cards[c].sevenths += p->sevenths;
    out[ord[k].i].card = c;
    out[ord[k].i].start = (unsigned)s;
  }
  if (!rc)
    *n_cards = used;
  free(ord);
  free(cards);
  return rc;
}
