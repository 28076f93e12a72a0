/* Recommendations from an analysed report: idle nodes, consolidation, MIG or time-slicing, and
 * cheaper GPU models, each with a reason, evidence, monthly savings and a confidence. */
#ifndef GS_RS_RECOMMEND_H
#define GS_RS_RECOMMEND_H

#include <stddef.h>

#include "rightsize/cost.h"
#include "rightsize/migpack.h"
#include "rightsize/model.h"

/* Appends recommendations to r (analysed and priced by rs_cost_apply) using p for the price of
 * other GPU models; sorts them by kind, then savings. Returns 0 or GS_ENOMEM. */
int rs_recommend(struct rs_report *r, const struct rs_prices *p);

#endif
