/* For tests that build a rightsize report by hand: the names they leave unset (NULL in calloc'd
 * rows) become "", as the analyser's reports always carry a string in each (model.h). */
#ifndef GS_TEST_RS_NAMES_H
#define GS_TEST_RS_NAMES_H

#include <stdarg.h>
#include <stdio.h>

#include "rightsize/model.h"

static inline void rs_test_blank_names(struct rs_report *r) {
  for (size_t i = 0; i < r->n_gpus; i++) {
    struct rs_gpu *g = &r->gpus[i];
    const char **f[] = {&g->node,          &g->gpu,   &g->uuid,     &g->gpu_i_id,
                        &g->gpu_i_profile, &g->model, &g->model_key};
    for (size_t k = 0; k < sizeof(f) / sizeof(f[0]); k++)
      if (!*f[k])
        *f[k] = "";
  }
  for (size_t i = 0; i < r->n_workloads; i++) {
    struct rs_workload *w = &r->workloads[i];
    const char **f[] = {&w->namespace_, &w->pod, &w->container, &w->owner};
    for (size_t k = 0; k < sizeof(f) / sizeof(f[0]); k++)
      if (!*f[k])
        *f[k] = "";
  }
}

/* A printf-formatted name in r's string store (RS_NAME_MAX at most, as the analyser keeps). */
static inline __attribute__((format(printf, 2, 3))) const char *rs_test_name(struct rs_report *r,
                                                                             const char *fmt, ...) {
  char buf[RS_NAME_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return rs_report_str(r, buf, sizeof(buf));
}

#endif
