/* Unit tests of the MIG placement tables and the packer (issue 28 §1).
 *
 * Upstream facts, from NVIDIA's MIG user guide (docs.nvidia.com/datacenter/tesla/mig-user-guide):
 *  - "Supported MIG Profiles": per model, each profile's fraction of memory (in eighths), of SMs
 *    (in sevenths) and the number of instances available (A100-40GB: 1g.5gb 1/8 7, 1g.10gb 2/8 4,
 *    2g.10gb 2/8 3, 3g.20gb 4/8 2, 4g.20gb 4/8 1, 7g.40gb full 1; A100-80GB and H100-80GB the same
 *    with 10/20/20/40/40/80 GB; H200-141GB with 18/35/35/71/71/141 GB);
 *  - "Getting Started with MIG", `nvidia-smi mig -lgipp`: Profile ID 19 {0,1,2,3,4,5,6}:1,
 *    ID 15 {0,2,4,6}:2, ID 14 {0,2,4}:2, ID 9 {0,4}:4, ID 5 {0}:4, ID 0 {0}:8 (the same listing
 *    is shown for H100 80GB and H100 NVL);
 *  - NVML's nvmlDeviceGetGpuInstancePossiblePlacements_v2: an instance occupies `size` memory
 *    slices from `start`, and creating one that overlaps an occupied slice fails. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rightsize/migpack.h"

static const char *const models[] = {"A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB"};

struct want {
  const char *name;
  unsigned sevenths, eighths, instances, smi_id;
  unsigned starts[8];
  size_t n_starts;
};

/* The guide's tables, one row per profile, smallest first. */
static const struct {
  const char *model;
  struct want p[6];
} tables[] = {
    {"A100-40GB",
     {{"1g.5gb", 1, 1, 7, 19, {0, 1, 2, 3, 4, 5, 6}, 7},
      {"1g.10gb", 1, 2, 4, 15, {0, 2, 4, 6}, 4},
      {"2g.10gb", 2, 2, 3, 14, {0, 2, 4}, 3},
      {"3g.20gb", 3, 4, 2, 9, {0, 4}, 2},
      {"4g.20gb", 4, 4, 1, 5, {0}, 1},
      {"7g.40gb", 7, 8, 1, 0, {0}, 1}}},
    {"A100-80GB",
     {{"1g.10gb", 1, 1, 7, 19, {0, 1, 2, 3, 4, 5, 6}, 7},
      {"1g.20gb", 1, 2, 4, 15, {0, 2, 4, 6}, 4},
      {"2g.20gb", 2, 2, 3, 14, {0, 2, 4}, 3},
      {"3g.40gb", 3, 4, 2, 9, {0, 4}, 2},
      {"4g.40gb", 4, 4, 1, 5, {0}, 1},
      {"7g.80gb", 7, 8, 1, 0, {0}, 1}}},
    {"H100-80GB",
     {{"1g.10gb", 1, 1, 7, 19, {0, 1, 2, 3, 4, 5, 6}, 7},
      {"1g.20gb", 1, 2, 4, 15, {0, 2, 4, 6}, 4},
      {"2g.20gb", 2, 2, 3, 14, {0, 2, 4}, 3},
      {"3g.40gb", 3, 4, 2, 9, {0, 4}, 2},
      {"4g.40gb", 4, 4, 1, 5, {0}, 1},
      {"7g.80gb", 7, 8, 1, 0, {0}, 1}}},
    {"H200-141GB",
     {{"1g.18gb", 1, 1, 7, 19, {0, 1, 2, 3, 4, 5, 6}, 7},
      {"1g.35gb", 1, 2, 4, 15, {0, 2, 4, 6}, 4},
      {"2g.35gb", 2, 2, 3, 14, {0, 2, 4}, 3},
      {"3g.71gb", 3, 4, 2, 9, {0, 4}, 2},
      {"4g.71gb", 4, 4, 1, 5, {0}, 1},
      {"7g.141gb", 7, 8, 1, 0, {0}, 1}}},
};

static void test_tables(void **state) {
  (void)state;
  for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
    size_t n;
    const struct rs_mig_profile *p = rs_mig_profiles(tables[t].model, &n);
    assert_non_null(p);
    assert_int_equal(n, 6);
    for (size_t i = 0; i < n; i++) {
      const struct want *w = &tables[t].p[i];
      assert_string_equal(p[i].name, w->name);
      assert_int_equal(p[i].sevenths, w->sevenths);
      assert_int_equal(p[i].mem_slices, w->eighths);
      assert_int_equal(p[i].max_instances, w->instances);
      assert_int_equal(p[i].smi_id, w->smi_id);
      unsigned mask = 0;
      for (size_t k = 0; k < w->n_starts; k++)
        mask |= 1u << w->starts[k];
      assert_int_equal(p[i].starts, mask);
    }
  }
  size_t n = 9;
  assert_null(rs_mig_profiles("L4", &n));
  assert_int_equal(n, 0);
}

static const struct rs_mig_profile *prof(const char *model, const char *name) {
  size_t n;
  const struct rs_mig_profile *p = rs_mig_profiles(model, &n);
  for (size_t i = 0; i < n; i++)
    if (!strcmp(p[i].name, name))
      return &p[i];
  fail_msg("no profile %s on %s", name, model);
  return NULL;
}

/* The guide's "instances available" is what the placements allow: max_instances copies fit on
 * one card and one more does not. */
static void test_instances_follow_from_placements(void **state) {
  (void)state;
  for (size_t m = 0; m < sizeof(models) / sizeof(models[0]); m++) {
    size_t n;
    const struct rs_mig_profile *p = rs_mig_profiles(models[m], &n);
    for (size_t i = 0; i < n; i++) {
      const struct rs_mig_profile *items[8];
      struct rs_mig_place out[8];
      size_t cards;
      for (unsigned k = 0; k <= p[i].max_instances; k++)
        items[k] = &p[i];
      assert_int_equal(rs_mig_pack(items, p[i].max_instances, out, &cards), 0);
      assert_int_equal(cards, 1);
      assert_int_equal(rs_mig_pack(items, p[i].max_instances + 1, out, &cards), 0);
      assert_int_equal(cards, 2);
    }
  }
}

/* What the hardware refuses and accepts, on every model: (already placed) + (profile at start). */
static void test_fits_table(void **state) {
  (void)state;
  static const struct {
    const char *placed[4]; /* "<profile index>@<start>" */
    int prof;              /* index in the model's table (0 = 1g small ... 5 = 7g) */
    unsigned start;
    bool ok;
  } cases[] = {
      {{NULL}, 4, 0, true},                        /* 4g at 0 */
      {{NULL}, 4, 4, false},                       /* 4g only at 0 */
      {{NULL}, 3, 2, false},                       /* 3g at 0 or 4 */
      {{NULL}, 3, 4, true},                        /* */
      {{NULL}, 2, 6, false},                       /* 2g at 0, 2, 4 */
      {{NULL}, 1, 6, true},                        /* 1g (2 slices) at 6 */
      {{NULL}, 0, 7, false},                       /* 1g (1 slice) never at 7 */
      {{NULL}, 5, 0, true},                        /* 7g: the whole card */
      {{"4@0"}, 3, 4, true},                       /* 4g + 3g: a valid pair */
      {{"3@4"}, 4, 0, true},                       /* the same pair, placed the other way */
      {{"3@0"}, 4, 0, false},                      /* overlap */
      {{"3@0", "3@4"}, 0, 3, false},               /* two 3g fill the memory */
      {{"3@0", "3@4"}, 0, 6, false},               /* */
      {{"2@0", "2@2", "2@4"}, 1, 6, true},         /* 3 x 2g + 1g.(2 slices): 7 sevenths */
      {{"2@0", "2@2", "2@4"}, 0, 6, true},         /* 3 x 2g + 1g: 7 sevenths */
      {{"2@0", "2@2", "2@4", "0@6"}, 0, 7, false}, /* slot 7 never starts an instance */
      {{"4@0", "2@4"}, 0, 6, true},                /* 4 + 2 + 1 = 7 */
      {{"4@0", "2@4", "0@6"}, 0, 5, false},        /* overlap with the 2g */
      {{"5@0"}, 0, 0, false},                      /* a 7g card holds nothing else */
      {{"3@4", "2@0", "2@2"}, 0, 1, false},        /* 3 + 2 + 2 = 7 sevenths, memory full */
  };
  for (size_t m = 0; m < sizeof(models) / sizeof(models[0]); m++) {
    size_t n;
    const struct rs_mig_profile *p = rs_mig_profiles(models[m], &n);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
      struct rs_mig_card c = {0, 0};
      for (size_t k = 0; k < 4 && cases[i].placed[k]; k++) {
        int pi = cases[i].placed[k][0] - '0';
        unsigned st = (unsigned)(cases[i].placed[k][2] - '0');
        assert_true(rs_mig_fits(&c, &p[pi], st)); /* the setup itself is valid */
        c.mask |= ((1u << p[pi].mem_slices) - 1u) << st;
        c.sevenths += p[pi].sevenths;
      }
      if (rs_mig_fits(&c, &p[cases[i].prof], cases[i].start) != cases[i].ok)
        fail_msg("%s case %zu: %s at %u should be %s", models[m], i, p[cases[i].prof].name,
                 cases[i].start, cases[i].ok ? "accepted" : "refused");
    }
  }
}

/* ---- exhaustive check against a brute-force optimum ------------------------------------------ */

#define MAXN 7

static size_t best;

/* The fewest cards for items[i..n) given cards[0..used), trying every valid start. */
static void opt(const struct rs_mig_profile *const *items, size_t i, size_t n,
                struct rs_mig_card *cards, size_t used) {
  if (used >= best)
    return;
  if (i == n) {
    best = used;
    return;
  }
  const struct rs_mig_profile *p = items[i];
  for (size_t c = 0; c <= used && c < MAXN; c++)
    for (unsigned s = 0; s < RS_MIG_MEM_SLICES; s++) {
      if (!rs_mig_fits(&cards[c], p, s))
        continue;
      struct rs_mig_card keep = cards[c];
      cards[c].mask |= ((1u << p->mem_slices) - 1u) << s;
      cards[c].sevenths += p->sevenths;
      opt(items, i + 1, n, cards, c == used ? used + 1 : used);
      cards[c] = keep;
    }
}

/* Every multiset of up to 7 slices of the 1g..4g profiles, on every model: the packer places only
 * what the hardware accepts (valid starts, no overlap, at most 7 sevenths, at most max_instances
 * of a profile per card), never uses more cards than slices, and matches the brute-force optimum
 * except in the cases docs/rightsize.md names (a 3g that should sit beside two 2g instead of
 * beside another 3g), where it uses one card more. */
static void test_pack_exhaustive(void **state) {
  (void)state;
  for (size_t m = 0; m < sizeof(models) / sizeof(models[0]); m++) {
    size_t np;
    const struct rs_mig_profile *p = rs_mig_profiles(models[m], &np);
    size_t worse = 0, total = 0;
    char first_worse[128] = "";
    for (size_t n = 1; n <= MAXN; n++) {
      unsigned idx[MAXN] = {0}; /* non-decreasing profile indices 0..4: a multiset */
      for (;;) {
        const struct rs_mig_profile *items[MAXN];
        struct rs_mig_place out[MAXN];
        size_t cards = 0;
        for (size_t i = 0; i < n; i++)
          items[i] = &p[idx[i]];
        assert_int_equal(rs_mig_pack(items, n, out, &cards), 0);
        assert_true(cards >= 1 && cards <= n);
        struct rs_mig_card cs[MAXN];
        unsigned count[MAXN][6];
        memset(cs, 0, sizeof(cs));
        memset(count, 0, sizeof(count));
        for (size_t i = 0; i < n; i++) {
          assert_true(out[i].card < cards);
          assert_true(rs_mig_fits(&cs[out[i].card], items[i], out[i].start));
          cs[out[i].card].mask |= ((1u << items[i]->mem_slices) - 1u) << out[i].start;
          cs[out[i].card].sevenths += items[i]->sevenths;
          assert_true(cs[out[i].card].sevenths <= 7);
          assert_true(++count[out[i].card][idx[i]] <= items[i]->max_instances);
        }
        struct rs_mig_card scratch[MAXN];
        memset(scratch, 0, sizeof(scratch));
        best = n + 1;
        opt(items, 0, n, scratch, 0);
        assert_true(cards >= best);
        assert_true(cards <= best + 1);
        if (cards > best && worse++ == 0) {
          size_t off = 0;
          for (size_t i = 0; i < n; i++)
            off += (size_t)snprintf(first_worse + off, sizeof(first_worse) - off, "%s%s",
                                    i ? " " : "", items[i]->name);
        }
        total++;
        size_t k = n;
        while (k > 0 && idx[k - 1] == 4)
          k--;
        if (k == 0)
          break;
        idx[k - 1]++;
        for (size_t j = k; j < n; j++)
          idx[j] = idx[k - 1];
      }
    }
    assert_int_equal(total, 791); /* multisets of 1..7 out of 5 profiles */
    /* 2 of 791: four 2g and two 3g (2 cards: 3g@4 + 2g@0 + 2g@2 twice; first fit pairs the
     * 3g), and two 1g (2 slices), three 2g and two 3g */
    assert_int_equal(worse, 2);
    char want[128];
    snprintf(want, sizeof(want), "%s %s %s %s %s %s", p[2].name, p[2].name, p[2].name, p[2].name,
             p[3].name, p[3].name);
    assert_string_equal(first_worse, want);
  }
}

/* Two 3g pair on one card at slices 0 and 4; a 4g goes first so that a 3g can join it. */
static void test_pack_pairs(void **state) {
  (void)state;
  const struct rs_mig_profile *g3 = prof("H100-80GB", "3g.40gb"),
                              *g4 = prof("H100-80GB", "4g.40gb");
  const struct rs_mig_profile *items[4] = {g3, g3, g3, g4};
  struct rs_mig_place out[4];
  size_t cards;
  assert_int_equal(rs_mig_pack(items, 4, out, &cards), 0);
  assert_int_equal(cards, 2);
  assert_int_equal(out[3].card, 0); /* the 4g opens card 0 at slice 0 */
  assert_int_equal(out[3].start, 0);
  assert_int_equal(out[0].card, 0); /* the first 3g joins it at slice 4 */
  assert_int_equal(out[0].start, 4);
  assert_int_equal(out[1].card, 1);
  assert_int_equal(out[2].card, 1);
  assert_true(out[1].start != out[2].start);
  assert_int_equal(rs_mig_pack(items, 0, out, &cards), 0);
  assert_int_equal(cards, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tables),     cmocka_unit_test(test_instances_follow_from_placements),
      cmocka_unit_test(test_fits_table), cmocka_unit_test(test_pack_exhaustive),
      cmocka_unit_test(test_pack_pairs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
