/* Helpers for the rightsize unit tests: feed constant series into an analyser. */
#ifndef RS_TESTLIB_H
#define RS_TESTLIB_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rightsize/analyze.h"
#include "rightsize/prom.h"

#define T_END 1767225600000LL
#define T_STEP 300000LL

/* Adds one series of `metric` with value v (NaN = skip) at every step of [from, to). */
static inline int rs_t_feed(struct rs_analyzer *a, enum rs_metric m, const char *node,
                            const char *gpu, const char *model, const char *pod, const char *ns,
                            int64_t from, int64_t to, double v) {
  size_t n = (size_t)((to - from) / T_STEP);
  struct rs_point *p = calloc(n + 1, sizeof(*p));
  for (size_t i = 0; i < n; i++) {
    p[i].t_ms = from + (int64_t)i * T_STEP;
    p[i].v = v;
  }
  struct rs_series s = {.labels = {.node = node,
                                   .gpu = gpu,
                                   .uuid = "",
                                   .model = model,
                                   .pod = pod ? pod : "",
                                   .namespace_ = ns ? ns : "",
                                   .container = ""},
                        .points = p,
                        .n = n};
  int rc = rs_analyzer_add(a, m, &s);
  free(p);
  return rc;
}

/* One GPU with constant util/used/free over [from, to). */
static inline void rs_t_gpu(struct rs_analyzer *a, const char *node, const char *gpu,
                            const char *model, const char *pod, const char *ns, int64_t from,
                            int64_t to, double util, double used, double total) {
  rs_t_feed(a, RS_M_FB_FREE, node, gpu, model, pod, ns, from, to, total - used);
  rs_t_feed(a, RS_M_FB_USED, node, gpu, model, pod, ns, from, to, used);
  rs_t_feed(a, RS_M_UTIL, node, gpu, model, pod, ns, from, to, util);
}

#endif
