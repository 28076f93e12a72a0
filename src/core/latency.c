/* Windowed latency quantiles from summed histogram bucket deltas (see latency.h). */
#include "core/latency.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "core/err.h"

static int fail(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *why, size_t whylen, const char *fmt, ...) {
  if (why && whylen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
  }
  return GS_EINVAL;
}

double latency_count(const struct latency_hist *h) {
  return h->n ? h->cum[h->n - 1] : 0;
}

int latency_check(const struct latency_hist *h, char *why, size_t whylen) {
  if (h->n == 0)
    return fail(why, whylen, "no buckets");
  if (h->n > LATENCY_MAX_BUCKETS)
    return fail(why, whylen, "more than %d buckets", LATENCY_MAX_BUCKETS);
  if (!(h->le[h->n - 1] == INFINITY))
    return fail(why, whylen, "no +Inf bucket");
  for (uint32_t i = 0; i < h->n; i++) {
    if (i + 1 < h->n && !isfinite(h->le[i]))
      return fail(why, whylen, "bucket bound %g before the +Inf bucket", h->le[i]);
    if (isnan(h->le[i]) || (i && !(h->le[i] > h->le[i - 1])))
      return fail(why, whylen, "bucket bounds not increasing (le %g after %g)", h->le[i],
                  i ? h->le[i - 1] : NAN);
    if (!isfinite(h->cum[i]) || h->cum[i] < 0)
      return fail(why, whylen, "bucket le=%g count is %g (a finite number >= 0 expected)", h->le[i],
                  h->cum[i]);
    if (i && h->cum[i] < h->cum[i - 1])
      return fail(why, whylen, "buckets not cumulative (le=%g holds %g, le=%g holds %g)",
                  h->le[i - 1], h->cum[i - 1], h->le[i], h->cum[i]);
  }
  return 0;
}

static int same_bounds(const struct latency_hist *a, const struct latency_hist *b, char *why,
                       size_t whylen) {
  if (a->n != b->n)
    return fail(why, whylen, "buckets changed (%u bounds, then %u)", a->n, b->n);
  for (uint32_t i = 0; i < a->n; i++)
    if (a->le[i] != b->le[i])
      return fail(why, whylen, "buckets changed (bound %g, then %g)", a->le[i], b->le[i]);
  return 0;
}

int latency_delta(const struct latency_hist *start, const struct latency_hist *end,
                  struct latency_hist *out, char *why, size_t whylen) {
  int rc = latency_check(start, why, whylen);
  if (!rc)
    rc = latency_check(end, why, whylen);
  if (!rc)
    rc = same_bounds(start, end, why, whylen);
  if (rc)
    return rc;
  bool reset = false;
  for (uint32_t i = 0; i < end->n; i++)
    reset |= end->cum[i] < start->cum[i];
  *out = *end;
  if (!reset)
    for (uint32_t i = 0; i < end->n; i++)
      out->cum[i] = end->cum[i] - start->cum[i];
  rc = latency_check(out, why, whylen);
  if (rc) {
    char inner[160];
    snprintf(inner, sizeof inner, "%s", why ? why : "");
    return fail(why, whylen, "window: %s", inner);
  }
  return 0;
}

int latency_add(struct latency_hist *sum, const struct latency_hist *d, char *why, size_t whylen) {
  int rc = latency_check(d, why, whylen);
  if (rc)
    return rc;
  if (sum->n == 0) {
    *sum = *d;
    return 0;
  }
  rc = same_bounds(sum, d, why, whylen);
  if (rc)
    return rc;
  for (uint32_t i = 0; i < d->n; i++)
    sum->cum[i] += d->cum[i];
  if (!isfinite(latency_count(sum)))
    return fail(why, whylen, "the sum of the pods' counts overflows");
  return 0;
}

int latency_quantile(const struct latency_hist *d, double q, double *out, char *why,
                     size_t whylen) {
  if (!(q > 0 && q < 1))
    return fail(why, whylen, "quantile %g is not in (0, 1)", q);
  int rc = latency_check(d, why, whylen);
  if (rc)
    return rc;
  double total = latency_count(d);
  if (total <= 0) {
    if (why && whylen)
      snprintf(why, whylen, "no observation in the window");
    return GS_EUNAVAIL;
  }
  double rank = q * total;
  uint32_t b = 0;
  while (b < d->n - 1 && d->cum[b] < rank)
    b++;
  if (b == d->n - 1) { /* the +Inf bucket: the highest finite bound is all that is known */
    if (d->n < 2)
      return fail(why, whylen, "only a +Inf bucket: no finite bound to read a quantile from");
    *out = d->le[d->n - 2];
    return 0;
  }
  double lower = b ? d->le[b - 1] : (d->le[0] > 0 ? 0 : d->le[0]);
  double below = b ? d->cum[b - 1] : 0;
  double in = d->cum[b] - below;
  *out = in > 0 ? lower + (d->le[b] - lower) * ((rank - below) / in) : d->le[b];
  return 0;
}

int latency_window_quantile(const struct latency_hist *start, const struct latency_hist *end,
                            size_t n, double q, double *out, char *why, size_t whylen) {
  struct latency_hist s = {0};
  char inner[160];
  for (size_t i = 0; i < n; i++) {
    struct latency_hist di;
    int rc = latency_delta(&start[i], &end[i], &di, inner, sizeof inner);
    if (!rc && latency_count(&di) > 0)
      rc = latency_add(&s, &di, inner, sizeof inner);
    if (rc) {
      if (why && whylen)
        snprintf(why, whylen, "pod %zu: %s", i, inner);
      return rc;
    }
  }
  if (s.n == 0) {
    if (why && whylen)
      snprintf(why, whylen, "no observation in the window");
    return GS_EUNAVAIL;
  }
  return latency_quantile(&s, q, out, why, whylen);
}
