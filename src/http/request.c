/* Route lookup and Accept-Encoding, read without libmicrohttpd so that they can be fuzzed. */
#include "http/request.h"

#include <string.h>
#include <strings.h>

const struct http_route *http_route_find(const struct http_route *routes, size_t n,
                                         const char *path) {
  for (size_t i = 0; path && i < n; i++)
    if (strcmp(routes[i].path, path) == 0)
      return &routes[i];
  return NULL;
}

static bool ows(char c) {
  return c == ' ' || c == '\t';
}

/* A qvalue in [p, end): "0" ["." 0-3 digits] or "1" ["." 0-3 zeros]. Returns thousandths
 * (0..1000), or -1. */
static int qvalue(const char *p, const char *end) {
  if (p >= end || (*p != '0' && *p != '1'))
    return -1;
  int whole = *p++ - '0', frac = 0, digits = 0;
  if (p < end && *p == '.')
    for (p++; p < end && digits < 3 && *p >= '0' && *p <= '9'; p++, digits++)
      frac = frac * 10 + (*p - '0');
  if (p != end)
    return -1;
  for (; digits < 3; digits++)
    frac *= 10;
  return (whole == 1 && frac) ? -1 : whole * 1000 + frac;
}

/* One element [s, end): its coding (name, nlen) and its weight, or -1 when malformed. */
static int element(const char *s, const char *end, const char **name, size_t *nlen) {
  while (s < end && ows(*s))
    s++;
  const char *t = s;
  while (t < end && !ows(*t) && *t != ';')
    t++;
  *name = s;
  *nlen = (size_t)(t - s);
  int q = 1000;
  for (const char *r = t;;) { /* *( OWS ";" OWS name "=" value ) OWS */
    while (r < end && ows(*r))
      r++;
    if (r == end)
      return q;
    if (*r++ != ';')
      return -1;
    while (r < end && ows(*r))
      r++;
    const char *pn = r;
    while (r < end && *r != '=' && *r != ';' && !ows(*r))
      r++;
    if (r == end || *r != '=' || r == pn)
      return -1;
    size_t pnl = (size_t)(r - pn);
    const char *pv = ++r;
    while (r < end && *r != ';' && !ows(*r))
      r++;
    if (pnl == 1 && (*pn == 'q' || *pn == 'Q') && (q = qvalue(pv, r)) < 0)
      return -1;
  }
}

bool http_accepts_gzip(const char *ae) {
  int gzip = -1, star = -1; /* the highest weight seen, -1: not listed */
  for (const char *p = ae; p && *p;) {
    const char *end = p + strcspn(p, ",");
    const char *name;
    size_t n;
    int q = element(p, end, &name, &n);
    if (q >= 0 && ((n == 4 && strncasecmp(name, "gzip", 4) == 0) ||
                   (n == 6 && strncasecmp(name, "x-gzip", 6) == 0)))
      gzip = q > gzip ? q : gzip;
    else if (q >= 0 && n == 1 && *name == '*')
      star = q > star ? q : star;
    p = *end ? end + 1 : end;
  }
  return gzip >= 0 ? gzip > 0 : star > 0;
}
