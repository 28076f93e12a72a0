/* Recommendations from an analysed report: idle nodes, consolidation, MIG or time-slicing, and
 * cheaper GPU models, each with a reason, evidence, monthly savings and a confidence. */
#ifndef GS_RS_RECOMMEND_H
#define GS_RS_RECOMMEND_H

#include <stddef.h>

#include "rightsize/cost.h"
#include "rightsize/model.h"

/* One MIG GPU-instance profile (NVIDIA MIG user guide, "Supported MIG Profiles"). */
struct rs_mig_profile {
  const char *name;       /* "1g.10gb" */
  unsigned sevenths;      /* compute slices of 7 */
  double mem_gb;          /* the slice's memory as named */
  unsigned max_instances; /* how many fit on one GPU */
};

/* The profiles of a family key ("A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB"), smallest
 * first, or NULL with *n = 0 when the family has no MIG. */
const struct rs_mig_profile *rs_mig_profiles(const char *key, size_t *n);

/* Appends recommendations to r (analysed and priced by rs_cost_apply) using p for the price of
 * other GPU models; sorts them by kind, then savings. Returns 0 or GS_ENOMEM. */
int rs_recommend(struct rs_report *r, const struct rs_prices *p);

#endif
