/* Prometheus text exposition parser: one pass over the lines, every name and label value copied
 * (unescaped) into one arena sized by the input, so that a document is three allocations. */
#include "core/promtext.h"

#include "core/err.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VALUE_TOKEN_MAX 128 /* bytes of one value or timestamp token */

struct priv {
  char *arena;
  struct prom_label *labels;
};

struct parser {
  const char *p, *end; /* the rest of the current line, without "\n" or "\r\n" */
  size_t line;
  char *arena;
  size_t alen, acap;
  const char *last_name; /* the previous sample's name, shared by a histogram's lines */
  struct prom_sample *samples;
  size_t n, cap;
  struct prom_label *labels;
  size_t nl, lcap;
  bool eof;
  char *err;
  size_t errlen;
};

static int fail(struct parser *ps, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct parser *ps, int code, const char *fmt, ...) {
  if (!ps->err || !ps->errlen)
    return code;
  int k = ps->line ? snprintf(ps->err, ps->errlen, "line %zu: ", ps->line) : 0;
  if (k < 0 || (size_t)k >= ps->errlen)
    return code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ps->err + k, ps->errlen - (size_t)k, fmt, ap);
  va_end(ap);
  return code;
}

/* The character at p for a message: 'c' when printable, \xHH otherwise, "end of line" at the end.
 */
static const char *show(const struct parser *ps, char *tmp, size_t n) {
  if (ps->p >= ps->end)
    return "end of line";
  unsigned char c = (unsigned char)*ps->p;
  if (c >= 0x20 && c < 0x7f)
    snprintf(tmp, n, "'%c'", c);
  else
    snprintf(tmp, n, "\\x%02x", c);
  return tmp;
}

static bool is_blank(char c) {
  return c == ' ' || c == '\t';
}
static bool is_alpha_(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

static void skip_blanks(struct parser *ps) {
  while (ps->p < ps->end && is_blank(*ps->p))
    ps->p++;
}
static bool at(const struct parser *ps, char c) {
  return ps->p < ps->end && *ps->p == c;
}

/* Appends n bytes and a NUL to the arena. The arena holds len + 1 bytes and every copy is
 * shorter than the input it came from (a name is followed by a delimiter, a value loses its
 * quotes), so this cannot run out; the check keeps it so if that reasoning ever breaks. */
static char *arena_put(struct parser *ps, const char *s, size_t n) {
  if (n + 1 > ps->acap - ps->alen)
    return NULL;
  char *d = ps->arena + ps->alen;
  memcpy(d, s, n);
  d[n] = '\0';
  ps->alen += n + 1;
  return d;
}

/* Reads a metric name (colon true) or a label name at p. */
static int read_name(struct parser *ps, bool colon, const char *what, const char **out,
                     const char **raw, size_t *rawlen) {
  const char *s = ps->p;
  if (!(ps->p < ps->end && (is_alpha_(*ps->p) || (colon && *ps->p == ':')))) {
    char tmp[8];
    return fail(ps, GS_EPARSE, "expected a %s name, found %s", what, show(ps, tmp, sizeof tmp));
  }
  while (ps->p < ps->end && (is_alpha_(*ps->p) || is_digit(*ps->p) || (colon && *ps->p == ':')))
    ps->p++;
  size_t n = (size_t)(ps->p - s);
  if (n > PROMTEXT_MAX_NAME)
    return fail(ps, GS_ETOOBIG, "%s name of %zu bytes (at most %d)", what, n, PROMTEXT_MAX_NAME);
  if (raw) {
    *raw = s;
    *rawlen = n;
  }
  if (!out)
    return 0;
  *out = arena_put(ps, s, n);
  return *out ? 0 : fail(ps, GS_ENOMEM, "arena exhausted");
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n) {
  if (s[0] < 0x80)
    return 1;
  size_t k;
  uint32_t cp;
  if (s[0] >= 0xc2 && s[0] <= 0xdf) {
    k = 2;
    cp = s[0] & 0x1fu;
  } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
    k = 3;
    cp = s[0] & 0x0fu;
  } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
    k = 4;
    cp = s[0] & 0x07u;
  } else {
    return 0;
  }
  if (n < k)
    return 0;
  for (size_t i = 1; i < k; i++) {
    if ((s[i] & 0xc0u) != 0x80u)
      return 0;
    cp = (cp << 6) | (s[i] & 0x3fu);
  }
  if ((k == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
      (k == 4 && (cp < 0x10000 || cp > 0x10ffff)))
    return 0;
  return k;
}

/* Reads a quoted label value at p (the opening quote included), unescaping into the arena. */
static int read_label_value(struct parser *ps, const char *label, const char **out) {
  char tmp[8];
  if (!at(ps, '"'))
    return fail(ps, GS_EPARSE, "label %s: expected '\"', found %s", label,
                show(ps, tmp, sizeof tmp));
  ps->p++;
  char *d = ps->arena + ps->alen, *start = d;
  for (;;) {
    if (ps->p >= ps->end)
      return fail(ps, GS_EPARSE, "label %s: value without its closing '\"'", label);
    char c = *ps->p++;
    if (c == '"')
      break;
    if (c == '\0')
      return fail(ps, GS_EPARSE, "label %s: NUL byte in the value", label);
    if (c == '\\') {
      if (ps->p >= ps->end)
        return fail(ps, GS_EPARSE, "label %s: value without its closing '\"'", label);
      char e = *ps->p++;
      if (e == 'n')
        c = '\n';
      else if (e == '\\' || e == '"')
        c = e;
      else
        return fail(ps, GS_EPARSE,
                    "label %s: invalid escape \\%c in the value (allowed: \\\\ \\\" \\n)", label,
                    (e >= 0x20 && e < 0x7f) ? e : '?');
    }
    if ((size_t)(d - start) >= PROMTEXT_MAX_VALUE)
      return fail(ps, GS_ETOOBIG, "label %s: value over %d bytes", label, PROMTEXT_MAX_VALUE);
    if ((size_t)(d - ps->arena) + 1 >= ps->acap)
      return fail(ps, GS_ENOMEM, "arena exhausted");
    *d++ = c;
  }
  size_t n = (size_t)(d - start);
  for (size_t i = 0; i < n;) {
    size_t k = utf8_len((const unsigned char *)start + i, n - i);
    if (!k)
      return fail(ps, GS_EPARSE, "label %s: value is not UTF-8 (byte %zu)", label, i + 1);
    i += k;
  }
  *d = '\0';
  ps->alen += n + 1;
  *out = start;
  return 0;
}

static int grow(struct parser *ps, void **arr, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap)
    return 0;
  size_t nc = *cap ? *cap * 2 : 64;
  while (nc < need)
    nc *= 2;
  void *p = realloc(*arr, nc * elem);
  if (!p)
    return fail(ps, GS_ENOMEM, "out of memory");
  *arr = p;
  *cap = nc;
  return 0;
}

static int read_labels(struct parser *ps, size_t *count) {
  size_t first = ps->nl;
  ps->p++; /* '{' */
  for (;;) {
    skip_blanks(ps);
    if (at(ps, '}')) { /* "{}" and a trailing comma are allowed */
      ps->p++;
      break;
    }
    const char *name, *raw;
    size_t rawlen;
    int rc = read_name(ps, false, "label", NULL, &raw, &rawlen);
    if (rc)
      return rc;
    if (ps->nl - first >= PROMTEXT_MAX_LABELS)
      return fail(ps, GS_ETOOBIG, "more than %d labels", PROMTEXT_MAX_LABELS);
    if (rawlen == 8 && memcmp(raw, "__name__", 8) == 0)
      return fail(ps, GS_EPARSE, "label name __name__ is reserved");
    for (size_t i = first; i < ps->nl; i++)
      if (strlen(ps->labels[i].name) == rawlen && memcmp(ps->labels[i].name, raw, rawlen) == 0)
        return fail(ps, GS_EPARSE, "label %s appears twice", ps->labels[i].name);
    if (!(name = arena_put(ps, raw, rawlen)))
      return fail(ps, GS_ENOMEM, "arena exhausted");
    skip_blanks(ps);
    char tmp[8];
    if (!at(ps, '='))
      return fail(ps, GS_EPARSE, "label %s: expected '=', found %s", name,
                  show(ps, tmp, sizeof tmp));
    ps->p++;
    skip_blanks(ps);
    const char *value = NULL;
    if ((rc = read_label_value(ps, name, &value)))
      return rc;
    if ((rc = grow(ps, (void **)&ps->labels, &ps->lcap, ps->nl + 1, sizeof *ps->labels)))
      return rc;
    ps->labels[ps->nl].name = name;
    ps->labels[ps->nl].value = value;
    ps->nl++;
    skip_blanks(ps);
    if (at(ps, ',')) {
      ps->p++;
      continue;
    }
    if (at(ps, '}')) {
      ps->p++;
      break;
    }
    return fail(ps, GS_EPARSE, "expected ',' or '}' after label %s, found %s", name,
                show(ps, tmp, sizeof tmp));
  }
  *count = ps->nl - first;
  return 0;
}

/* Reads a number token (up to a blank or the end of the line) with strtod. */
static int read_number(struct parser *ps, const char *what, double *out) {
  const char *s = ps->p;
  while (ps->p < ps->end && !is_blank(*ps->p))
    ps->p++;
  size_t n = (size_t)(ps->p - s);
  if (n == 0)
    return fail(ps, GS_EPARSE, "expected a %s", what);
  if (n >= VALUE_TOKEN_MAX)
    return fail(ps, GS_EPARSE, "%s of %zu bytes (at most %d)", what, n, VALUE_TOKEN_MAX - 1);
  char tok[VALUE_TOKEN_MAX], *endp;
  memcpy(tok, s, n);
  tok[n] = '\0';
  errno = 0;
  double v = strtod(tok, &endp);
  if (endp != tok + n || (errno == ERANGE && isinf(v))) {
    for (size_t i = 0; i < n; i++) /* keep the message printable */
      if ((unsigned char)tok[i] < 0x20 || (unsigned char)tok[i] >= 0x7f)
        tok[i] = '?';
    return fail(ps, GS_EPARSE, "bad %s \"%s\" (a float: 1.5, 2e3, NaN, +Inf, -Inf)", what, tok);
  }
  *out = v;
  return 0;
}

/* After the value: [timestamp] [# exemplar] and blanks. */
static int read_tail(struct parser *ps) {
  skip_blanks(ps);
  if (ps->p < ps->end && *ps->p != '#') {
    double ts;
    int rc = read_number(ps, "timestamp", &ts);
    if (rc)
      return rc;
    if (!isfinite(ts))
      return fail(ps, GS_EPARSE, "timestamp is not finite");
    skip_blanks(ps);
  }
  if (at(ps, '#')) { /* OpenMetrics exemplar: "# {labels} value [timestamp]", skipped */
    ps->p++;
    skip_blanks(ps);
    if (!at(ps, '{'))
      return fail(ps, GS_EPARSE, "expected an exemplar \"# {...} value\" after the value");
    ps->p = ps->end;
  }
  if (ps->p < ps->end) {
    char tmp[8];
    return fail(ps, GS_EPARSE, "unexpected %s after the value", show(ps, tmp, sizeof tmp));
  }
  return 0;
}

static int read_sample(struct parser *ps) {
  if (ps->n >= PROMTEXT_MAX_SAMPLES)
    return fail(ps, GS_ETOOBIG, "more than %d samples", PROMTEXT_MAX_SAMPLES);
  const char *raw, *name;
  size_t rawlen;
  int rc = read_name(ps, true, "metric", NULL, &raw, &rawlen);
  if (rc)
    return rc;
  if (ps->last_name && strlen(ps->last_name) == rawlen && memcmp(ps->last_name, raw, rawlen) == 0)
    name = ps->last_name;
  else if (!(name = ps->last_name = arena_put(ps, raw, rawlen)))
    return fail(ps, GS_ENOMEM, "arena exhausted");
  skip_blanks(ps);
  size_t nlab = 0;
  if (at(ps, '{')) {
    if ((rc = read_labels(ps, &nlab)))
      return rc;
    skip_blanks(ps);
  } else if (ps->p == ps->end) {
    return fail(ps, GS_EPARSE, "metric %s has no value", name);
  } else if (ps->p == raw + rawlen) {
    char tmp[8];
    return fail(ps, GS_EPARSE, "metric %s: expected '{' or a blank, found %s", name,
                show(ps, tmp, sizeof tmp));
  }
  double v;
  if ((rc = read_number(ps, "value", &v)) || (rc = read_tail(ps)))
    return rc;
  if ((rc = grow(ps, (void **)&ps->samples, &ps->cap, ps->n + 1, sizeof *ps->samples)))
    return rc;
  ps->samples[ps->n++] = (struct prom_sample){name, nlab, NULL, v};
  return 0;
}

static bool word_is(const char *s, size_t n, const char *w) {
  return strlen(w) == n && memcmp(s, w, n) == 0;
}

/* "# HELP name text", "# TYPE name type", "# EOF" or any other comment. */
static int read_comment(struct parser *ps) {
  static const char *const types[] = {"counter", "gauge", "histogram",      "summary", "untyped",
                                      "unknown", "info",  "gaugehistogram", "stateset"};
  ps->p++; /* '#' */
  skip_blanks(ps);
  const char *w = ps->p;
  while (ps->p < ps->end && !is_blank(*ps->p))
    ps->p++;
  size_t wn = (size_t)(ps->p - w);
  bool help = word_is(w, wn, "HELP"), type = word_is(w, wn, "TYPE");
  if (word_is(w, wn, "EOF")) {
    skip_blanks(ps);
    if (ps->p == ps->end)
      ps->eof = true;
    return 0;
  }
  if (!help && !type)
    return 0; /* a comment */
  skip_blanks(ps);
  const char *raw;
  size_t rawlen;
  int rc = read_name(ps, true, "metric", NULL, &raw, &rawlen);
  if (rc)
    return rc;
  char tmp[8];
  if (ps->p < ps->end && !is_blank(*ps->p))
    return fail(ps, GS_EPARSE, "%s: unexpected %s after the metric name", help ? "HELP" : "TYPE",
                show(ps, tmp, sizeof tmp));
  if (help)
    return 0; /* the docstring is not kept */
  skip_blanks(ps);
  const char *t = ps->p;
  while (ps->p < ps->end && !is_blank(*ps->p))
    ps->p++;
  size_t tn = (size_t)(ps->p - t);
  skip_blanks(ps);
  for (size_t i = 0; i < sizeof types / sizeof *types; i++)
    if (word_is(t, tn, types[i]) && ps->p == ps->end)
      return 0;
  char shown[33];
  size_t sn = tn < sizeof shown - 1 ? tn : sizeof shown - 1;
  for (size_t i = 0; i < sn; i++)
    shown[i] = ((unsigned char)t[i] >= 0x20 && (unsigned char)t[i] < 0x7f) ? t[i] : '?';
  shown[sn] = '\0';
  if (ps->p != ps->end)
    return fail(ps, GS_EPARSE, "TYPE %.*s: unexpected text after the type \"%s\"", (int)rawlen, raw,
                shown);
  return fail(ps, GS_EPARSE,
              "TYPE %.*s: unknown type \"%s\" (counter, gauge, histogram, summary, untyped)",
              (int)rawlen, raw, shown);
}

static int read_line(struct parser *ps) {
  skip_blanks(ps);
  if (ps->p == ps->end)
    return 0;
  if (ps->eof)
    return fail(ps, GS_EPARSE, "text after # EOF");
  if (*ps->p == '#')
    return read_comment(ps);
  return read_sample(ps);
}

static void parser_free(struct parser *ps) {
  free(ps->arena);
  free(ps->samples);
  free(ps->labels);
}

int promtext_parse(const char *text, size_t len, struct prom_doc *out, char *err, size_t errlen) {
  struct parser ps = {.err = err, .errlen = errlen};
  memset(out, 0, sizeof *out);
  if (err && errlen)
    err[0] = '\0';
  if (len > PROMTEXT_MAX_BYTES)
    return fail(&ps, GS_ETOOBIG, "exposition of %zu bytes (at most %u)", len, PROMTEXT_MAX_BYTES);
  if (!text && len)
    return fail(&ps, GS_EPARSE, "no text");
  ps.acap = len + 1;
  if (!(ps.arena = malloc(ps.acap)))
    return fail(&ps, GS_ENOMEM, "out of memory");
  const char *s = text, *end = text + len;
  while (s < end) {
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    ps.line++;
    ps.p = s;
    ps.end = nl ? nl : end;
    if (ps.end > s && ps.end[-1] == '\r')
      ps.end--;
    int rc = read_line(&ps);
    if (rc) {
      parser_free(&ps);
      return rc;
    }
    s = nl ? nl + 1 : end;
  }
  struct priv *pv = malloc(sizeof *pv);
  if (!pv) {
    parser_free(&ps);
    return fail(&ps, GS_ENOMEM, "out of memory");
  }
  /* Labels were appended in sample order; pointers are set now that the array has stopped moving.
   */
  size_t off = 0;
  for (size_t i = 0; i < ps.n; i++) {
    ps.samples[i].labels = ps.samples[i].n_labels ? ps.labels + off : NULL;
    off += ps.samples[i].n_labels;
  }
  pv->arena = ps.arena;
  pv->labels = ps.labels;
  out->n = ps.n;
  out->samples = ps.samples;
  out->priv = pv;
  return 0;
}

void promtext_free(struct prom_doc *d) {
  if (!d)
    return;
  struct priv *pv = d->priv;
  if (pv) {
    free(pv->arena);
    free(pv->labels);
    free(pv);
  }
  free(d->samples);
  memset(d, 0, sizeof *d);
}

const char *prom_label(const struct prom_sample *s, const char *name) {
  if (!s || !name)
    return NULL;
  for (size_t i = 0; i < s->n_labels; i++)
    if (strcmp(s->labels[i].name, name) == 0)
      return s->labels[i].value;
  return NULL;
}
