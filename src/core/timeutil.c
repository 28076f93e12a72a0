/* Clocks and Go-style duration parsing. */
#include "core/timeutil.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"

int64_t time_mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct timespec time_mono_deadline(int64_t ms) {
  struct timespec dl;
  clock_gettime(CLOCK_MONOTONIC, &dl);
  if (ms < 0)
    ms = 0;
  dl.tv_sec += (time_t)(ms / 1000);
  dl.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (dl.tv_nsec >= 1000000000L) {
    dl.tv_sec++;
    dl.tv_nsec -= 1000000000L;
  }
  return dl;
}

int cond_init_mono(pthread_cond_t *cond) {
  pthread_condattr_t ca;
  int rc = pthread_condattr_init(&ca);
  if (rc)
    return rc;
  rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  if (!rc)
    rc = pthread_cond_init(cond, &ca);
  pthread_condattr_destroy(&ca);
  return rc;
}

int64_t time_wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int duration_parse_ms(const char *s, int64_t *out_ms) {
  if (!s || !*s)
    return GS_EINVAL;
  double total = 0;
  const char *p = s;
  while (*p) {
    if (!isdigit((unsigned char)*p) && *p != '.')
      return GS_EINVAL;
    /* Only plain decimals: strtod would also take hex and exponents ("0x1As", "1e3s"). */
    size_t digits = strspn(p, "0123456789.");
    if (digits == 0 || p[digits - 1] == '.')
      return GS_EINVAL;
    char *end;
    double v = strtod(p, &end);
    if (end != p + digits)
      return GS_EINVAL;
    if (end == p || !isfinite(v) || v < 0)
      return GS_EINVAL;
    p = end;
    double mult;
    if (strncmp(p, "ms", 2) == 0) {
      mult = 1;
      p += 2;
    } else if (*p == 's') {
      mult = 1000;
      p++;
    } else if (*p == 'm') {
      mult = 60000;
      p++;
    } else if (*p == 'h') {
      mult = 3600000;
      p++;
    } else if (*p == 'd') {
      mult = 86400000;
      p++;
    } else {
      return GS_EINVAL; /* a bare number has no unit: ambiguous, reject */
    }
    total += v * mult;
    if (total > 1e15)
      return GS_EINVAL;
  }
  int64_t ms = (int64_t)llround(total);
  if (ms <= 0)
    return GS_EINVAL;
  *out_ms = ms;
  return 0;
}

void duration_format(int64_t ms, char *buf, unsigned len) {
  if (ms % 1000 != 0 || ms == 0) {
    snprintf(buf, len, "%lldms", (long long)ms);
    return;
  }
  long long s = ms / 1000;
  long long h = s / 3600, m = (s % 3600) / 60, sec = s % 60;
  int n = 0;
  buf[0] = '\0';
  if (h)
    n += snprintf(buf + n, len > (unsigned)n ? len - (unsigned)n : 0, "%lldh", h);
  if (m)
    n += snprintf(buf + n, len > (unsigned)n ? len - (unsigned)n : 0, "%lldm", m);
  if (sec)
    snprintf(buf + n, len > (unsigned)n ? len - (unsigned)n : 0, "%llds", sec);
}
