/* Burn's plan: sizes, step lists, what the pattern asks at a time, and the duty-cycle arithmetic.
 */
#include "burn/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/err.h"
#include "core/timeutil.h"

#define SIZE_ALLOWED                                                                               \
  "a size such as 512MiB, 4GiB, 1.5GB, 2147483648 (bytes) or 20% (of the GPU's memory)"
#define STEPS_ALLOWED                                                                              \
  "PCT:DURATION,...,PCT with PCT 0..100, e.g. 30:2m,90:5m,0 (30% for 2 minutes, then 90% for 5, "  \
  "then 0)"
#define STEPS_MAX 1024

int burn_size_parse(const char *s, double *bytes, double *pct, char *err, size_t errlen) {
  *bytes = *pct = -1;
  size_t len = s ? strlen(s) : 0;
  size_t num = 0;
  while (num < len && (s[num] == '.' || (s[num] >= '0' && s[num] <= '9')))
    num++;
  double v;
  if (num == 0 || pattern_number(s, num, &v) != 0 || v < 0) {
    snprintf(err, errlen, "--memory: invalid size \"%s\"; allowed: %s", s ? s : "", SIZE_ALLOWED);
    return GS_EINVAL;
  }
  const char *unit = s + num;
  static const struct {
    const char *name;
    double mult;
  } units[] = {{"", 1},
               {"B", 1},
               {"KiB", 1024.0},
               {"MiB", BURN_MIB},
               {"GiB", 1073741824.0},
               {"TiB", 1099511627776.0},
               {"KB", 1e3},
               {"MB", 1e6},
               {"GB", 1e9},
               {"TB", 1e12}};
  if (strcmp(unit, "%") == 0) {
    if (v <= 0 || v > 100) {
      snprintf(err, errlen,
               "--memory: %s is not a share of the GPU's memory; allowed: 0%% < PCT <= 100%%", s);
      return GS_EINVAL;
    }
    *pct = v;
    return 0;
  }
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
    if (strcasecmp(unit, units[i].name) == 0) {
      double b = floor(v * units[i].mult);
      if (b > 1e15) { /* 1 PB: beyond any GPU, and keeps the arithmetic exact */
        snprintf(err, errlen, "--memory: %s is larger than any GPU; allowed: %s", s, SIZE_ALLOWED);
        return GS_EINVAL;
      }
      *bytes = b;
      return 0;
    }
  snprintf(err, errlen, "--memory: unknown unit \"%s\" in \"%s\"; allowed: %s", unit, s,
           SIZE_ALLOWED);
  return GS_EINVAL;
}

/* One "PCT[:DURATION]" item of --steps. */
static int step_item(const char *item, size_t len, double *pct, double *secs, char *err,
                     size_t errlen) {
  char buf[64];
  if (len == 0 || len >= sizeof buf) {
    snprintf(err, errlen, "--steps: invalid step \"%.*s\"; allowed: %s", (int)(len > 40 ? 40 : len),
             item, STEPS_ALLOWED);
    return GS_EINVAL;
  }
  memcpy(buf, item, len);
  buf[len] = '\0';
  char *colon = strchr(buf, ':');
  size_t vlen = colon ? (size_t)(colon - buf) : len;
  if (pattern_number(buf, vlen, pct) != 0 || *pct < 0 || *pct > 100) {
    snprintf(err, errlen, "--steps: invalid percent in step \"%s\"; allowed: %s", buf,
             STEPS_ALLOWED);
    return GS_EINVAL;
  }
  *secs = -1;
  if (colon) {
    int64_t ms;
    if (duration_parse_ms(colon + 1, &ms) != 0) {
      snprintf(err, errlen, "--steps: invalid duration in step \"%s\"; allowed: %s", buf,
               STEPS_ALLOWED);
      return GS_EINVAL;
    }
    *secs = (double)ms / 1000.0;
  }
  return 0;
}

int burn_steps_parse(const char *s, bool repeat, struct pattern *p, char *err, size_t errlen) {
  memset(p, 0, sizeof *p);
  if (!s || !*s) {
    snprintf(err, errlen, "--steps: required with --pattern step; allowed: %s", STEPS_ALLOWED);
    return GS_EINVAL;
  }
  size_t n = 1;
  for (const char *c = s; *c; c++)
    n += *c == ',';
  if (n > STEPS_MAX) {
    snprintf(err, errlen, "--steps: %zu steps is over the limit of %d", n, STEPS_MAX);
    return GS_EINVAL;
  }
  p->points = calloc(n, sizeof *p->points);
  if (!p->points) {
    snprintf(err, errlen, "--steps: out of memory");
    return GS_ENOMEM;
  }
  p->kind = PATTERN_STEPS;
  double t = 0;
  const char *item = s;
  for (size_t i = 0; i < n; i++) {
    const char *comma = strchr(item, ',');
    size_t len = comma ? (size_t)(comma - item) : strlen(item);
    double pct, secs;
    int rc = step_item(item, len, &pct, &secs, err, errlen);
    if (rc == 0 && secs < 0 && (i + 1 < n || repeat)) {
      snprintf(err, errlen, "--steps: step %zu (\"%.*s\") needs a duration%s; allowed: %s", i + 1,
               (int)(len > 40 ? 40 : len), item,
               i + 1 < n ? "" : " (--repeat loops over the sum of the durations)", STEPS_ALLOWED);
      rc = GS_EINVAL;
    }
    if (rc) {
      free(p->points);
      memset(p, 0, sizeof *p);
      return rc;
    }
    p->points[i].t = t;
    p->points[i].v = pct;
    p->npoints = i + 1;
    if (secs > 0)
      t += secs;
    item = comma ? comma + 1 : item + len;
  }
  if (repeat) {
    p->repeat = true;
    p->period = t;
  }
  pattern_range(p);
  return 0;
}

double burn_plan_util(const struct burn_plan *p, double t) {
  double v = p->follow == BURN_FOLLOW_MEMORY ? p->util_pct : pattern_eval(&p->level, t);
  return v < 0 ? 0 : v > 100 ? 100 : v;
}

uint64_t burn_plan_memory(const struct burn_plan *p, double t) {
  double b = p->mem_bytes;
  if (p->follow != BURN_FOLLOW_UTIL) {
    double peak = p->level.kind == PATTERN_CONST ? p->level.value : p->level.max;
    double v = pattern_eval(&p->level, t);
    b = peak > 0 && v > 0 ? p->mem_bytes * (v < peak ? v / peak : 1.0) : 0;
  }
  if (!(b > 0))
    return 0;
  return (uint64_t)(floor(b / BURN_MIB) * BURN_MIB);
}

double burn_duty_fraction(const struct burn_duty *d, double util_pct) {
  if (util_pct <= 0)
    return 0;
  if (util_pct >= 100)
    return 1;
  double f = util_pct / 100.0 + d->correction;
  return f < 0 ? 0 : f > 1 ? 1 : f;
}

uint64_t burn_duty_iterations(const struct burn_duty *d, double on_ms) {
  if (!(on_ms > 0) || !(d->rate > 0))
    return 0;
  double it = floor(on_ms * d->rate);
  return it < 1 ? 1 : (uint64_t)it;
}

void burn_duty_observe_kernel(struct burn_duty *d, uint64_t iterations, double ms) {
  if (!(ms > 0.05) || iterations == 0) /* too short to measure well */
    return;
  double r = (double)iterations / ms;
  d->rate = d->rate > 0 ? 0.7 * d->rate + 0.3 * r : r;
}

void burn_duty_observe_nvml(struct burn_duty *d, double target_pct, double measured_pct) {
  if (target_pct <= 0 || target_pct >= 100 || !isfinite(measured_pct))
    return;
  d->correction += 0.5 * (target_pct - measured_pct) / 100.0;
  if (d->correction > 1)
    d->correction = 1;
  if (d->correction < -1)
    d->correction = -1;
}

static bool pci_parse(const char *s, unsigned long v[4]) {
  char *end;
  for (int i = 0; i < 4; i++) {
    if (!s || !*s)
      return false;
    v[i] = strtoul(s, &end, 16);
    if (end == s)
      return false;
    char want = i < 2 ? ':' : i == 2 ? '.' : '\0';
    if (*end != want)
      return false;
    s = *end ? end + 1 : end;
  }
  return true;
}

bool burn_pci_same(const char *a, const char *b) {
  unsigned long x[4], y[4];
  return pci_parse(a, x) && pci_parse(b, y) && memcmp(x, y, sizeof x) == 0;
}
