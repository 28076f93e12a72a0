/* Aggregations over per-GPU values: max, min, avg, sum, p95, p99 (nearest rank). */
#ifndef GS_AGGREGATE_H
#define GS_AGGREGATE_H

#include <stddef.h>

enum aggregation { AGG_MAX = 0, AGG_MIN, AGG_AVG, AGG_SUM, AGG_P95, AGG_P99, AGG__COUNT };

/* Returns 0 and *out, or GS_EINVAL for an unknown name. */
int aggregation_parse(const char *s, enum aggregation *out);
const char *aggregation_name(enum aggregation a);
/* The list of allowed names, for error messages: "max, min, avg, sum, p95, p99". */
const char *aggregation_allowed(void);
/* Aggregates n values (n >= 1; vals may be reordered). Returns 0, or GS_EINVAL when n == 0.
 * Percentiles use nearest rank: the ceil(p/100*n)-th smallest value. */
int aggregate(enum aggregation a, double *vals, size_t n, double *out);

#endif
