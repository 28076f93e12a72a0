/* Aggregations over per-GPU values, with nearest-rank percentiles. */
#include "core/aggregate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

static const char *const agg_names[AGG__COUNT] = {"max", "min", "avg", "sum", "p95", "p99"};

int aggregation_parse(const char *s, enum aggregation *out) {
  for (int i = 0; i < AGG__COUNT; i++)
    if (strcmp(s, agg_names[i]) == 0) {
      *out = (enum aggregation)i;
      return 0;
    }
  return GS_EINVAL;
}

const char *aggregation_name(enum aggregation a) {
  return (a >= 0 && a < AGG__COUNT) ? agg_names[a] : "unknown";
}

const char *aggregation_allowed(void) {
  return "max, min, avg, sum, p95, p99";
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Nearest rank: the ceil(p/100*n)-th smallest value (1-based), at least the first. */
static double nearest_rank(double *vals, size_t n, double p) {
  qsort(vals, n, sizeof *vals, cmp_double);
  size_t rank = (size_t)ceil(p / 100.0 * (double)n);
  if (rank < 1)
    rank = 1;
  if (rank > n)
    rank = n;
  return vals[rank - 1];
}

int aggregate(enum aggregation a, double *vals, size_t n, double *out) {
  if (n == 0)
    return GS_EINVAL;
  double acc = vals[0];
  switch (a) {
  case AGG_MAX:
    for (size_t i = 1; i < n; i++)
      acc = vals[i] > acc ? vals[i] : acc;
    break;
  case AGG_MIN:
    for (size_t i = 1; i < n; i++)
      acc = vals[i] < acc ? vals[i] : acc;
    break;
  case AGG_AVG:
  case AGG_SUM:
    for (size_t i = 1; i < n; i++)
      acc += vals[i];
    if (a == AGG_AVG)
      acc /= (double)n;
    break;
  case AGG_P95: acc = nearest_rank(vals, n, 95); break;
  case AGG_P99: acc = nearest_rank(vals, n, 99); break;
  default: return GS_EINVAL;
  }
  *out = acc;
  return 0;
}
