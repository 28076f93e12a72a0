/* Latency quantiles from Prometheus histograms, merged across pods by summing bucket deltas over a
 * window (never by averaging per-pod quantiles). Pure arithmetic on plain structs, shared by the
 * agent (per pod), the scaler policy (per workload) and the simulator.
 *
 * Contract: a histogram is one cumulative snapshot of a family (the sum over a pod's series):
 * n upper bounds le[0..n) strictly increasing, finite but the last, which is +Inf, and cum[i] the
 * number of
 * observations <= le[i], finite, >= 0 and non-decreasing in i. A window's histogram is the
 * per-bucket difference of two snapshots of the same bounds (latency_delta); the workload's is
 * the sum of its pods' window histograms (latency_add); its quantile is read as Prometheus'
 * histogram_quantile does (latency_quantile). Every function refuses bad input with GS_EINVAL and
 * a reason in why (never a made-up value); why may be NULL. */
#ifndef GS_LATENCY_H
#define GS_LATENCY_H

#include <stddef.h>
#include <stdint.h>

/* Bounds one histogram may have, +Inf included. Engines ship 15..25; more is refused (a page
 * with thousands of buckets is no latency histogram a pod should pay to carry). */
#define LATENCY_MAX_BUCKETS 64
#define LATENCY_DEFAULT_QUANTILE 0.95

struct latency_hist {
  uint32_t n; /* bounds used, 0 = empty (no histogram yet) */
  double le[LATENCY_MAX_BUCKETS];
  double cum[LATENCY_MAX_BUCKETS];
};

/* The observations h holds (its +Inf bucket); 0 for an empty one. */
double latency_count(const struct latency_hist *h);

/* Returns 0 when h keeps the contract above, else GS_EINVAL with why ("no +Inf bucket", "bounds
 * not increasing", "count not finite", "buckets not cumulative", "more than 64 buckets"). */
int latency_check(const struct latency_hist *h, char *why, size_t whylen);

/* out = end - start, bucket by bucket: the observations of the window. Both must pass
 * latency_check and have the same bounds (else GS_EINVAL, "buckets changed"). A bucket whose
 * count went down means the series restarted (a pod restart): the window is then end alone, as
 * Prometheus' increase() takes a reset. A delta that is not cumulative (reset of some buckets
 * only) is GS_EINVAL. out may alias neither input. */
int latency_delta(const struct latency_hist *start, const struct latency_hist *end,
                  struct latency_hist *out, char *why, size_t whylen);

/* sum += d (bucket by bucket). An empty sum takes d's bounds; different bounds are GS_EINVAL
 * (pods of one workload configured with different buckets cannot be merged exactly). d must pass
 * latency_check. */
int latency_add(struct latency_hist *sum, const struct latency_hist *d, char *why, size_t whylen);

/* The q-quantile (0 < q < 1) of the observations in d, interpolated linearly inside its bucket
 * from the bucket's lower bound (0 for the first when its bound is > 0). When the rank falls in
 * the +Inf bucket the answer is the highest finite bound (a floor: the latency is at least that).
 * Returns 0 with *out, GS_EINVAL for bad input or q, GS_EUNAVAIL when d holds no observation
 * (the caller decides what an empty window means: never 0 by itself). */
int latency_quantile(const struct latency_hist *d, double q, double *out, char *why, size_t whylen);

/* The workload quantile of one window: for each of n pods, the delta of start[i] -> end[i]
 * (latency_delta), summed (latency_add), then latency_quantile. A pod whose window holds no
 * observation adds nothing. Returns as latency_quantile; why names the pod index that failed. */
int latency_window_quantile(const struct latency_hist *start, const struct latency_hist *end,
                            size_t n, double q, double *out, char *why, size_t whylen);

#endif
