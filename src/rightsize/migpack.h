/* MIG placement: the profiles of each MIG-capable GPU model with the memory slices each instance
 * occupies and where it may start, and a packer that puts slices onto as few cards as the
 * hardware allows.
 *
 * The hardware rule (NVML, nvmlDeviceGetGpuInstancePossiblePlacements_v2): a GPU instance occupies
 * `size` memory slices from `start`; creating one fails when it overlaps an instance already
 * there. The placements come from `nvidia-smi mig -lgipp` as printed in NVIDIA's MIG user guide
 * ("Getting Started with MIG", A100-40GB; the H100 and H200 tables of "Supported MIG Profiles"
 * have the same memory fractions and instance counts), e.g. 3g: {0,4}:4, 4g: {0}:4. */
#ifndef GS_RS_MIGPACK_H
#define GS_RS_MIGPACK_H

#include <stdbool.h>
#include <stddef.h>

#define RS_MIG_MEM_SLICES 8 /* memory slices of a MIG-capable A100/H100/H200 */
#define RS_MIG_COMPUTE 7    /* compute slices (sevenths) of the same cards */

/* One MIG GPU-instance profile (NVIDIA MIG user guide, "Supported MIG Profiles"). */
struct rs_mig_profile {
  const char *name;       /* "1g.10gb" */
  unsigned sevenths;      /* compute slices of 7 */
  double mem_gb;          /* the slice's memory as named */
  unsigned max_instances; /* how many fit on one GPU */
  unsigned smi_id;        /* nvidia-smi's GPU instance profile ID (19, 15, 14, 9, 5, 0) */
  unsigned mem_slices;    /* memory slices of 8 one instance occupies (placement size) */
  unsigned starts;        /* bit s set: the instance may start at memory slice s */
};

/* The profiles of a family key ("A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB"), smallest
 * first, or NULL with *n = 0 when the family has no MIG. */
const struct rs_mig_profile *rs_mig_profiles(const char *key, size_t *n);

/* Where one slice went: card (0-based, in the order the packer opened them) and start slice. */
struct rs_mig_place {
  size_t card;
  unsigned start;
};

/* A card being filled: occupied memory slices (bit s) and compute sevenths in use. */
struct rs_mig_card {
  unsigned mask;
  unsigned sevenths;
};

/* True when p fits on c at start: a valid start for p, no overlap, compute within 7. */
bool rs_mig_fits(const struct rs_mig_card *c, const struct rs_mig_profile *p, unsigned start);

/* Packs n slices (items[i] is slice i's profile, all of one card model) by first-fit decreasing:
 * largest memory first, then most compute (a 4g before a 3g, so a 3g can pair with it), each into
 * the first card that has room, at its highest free valid start (a 3g at slice 4 leaves 0..3 for
 * two 2g). out[i] gets slice i's place; *n_cards the cards used. Returns 0, or GS_ENOMEM, or
 * GS_EINVAL when a profile has no valid start. Not always optimal: see docs/rightsize.md. */
int rs_mig_pack(const struct rs_mig_profile *const *items, size_t n, struct rs_mig_place *out,
                size_t *n_cards);

#endif
