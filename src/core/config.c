/* Option table engine: defaults, environment, flags, bounds checks, help and start-up log. */
#include "core/config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "core/timeutil.h"

static void *field(void *target, const struct opt_def *d) {
  return (char *)target + d->offset;
}
static const void *cfield(const void *target, const struct opt_def *d) {
  return (const char *)target + d->offset;
}

/* The k-th name of an option's environment list ("GPUSCALE_X|DCGM_EXPORTER_X": ours first, then
 * dcgm-exporter's for the same setting) into buf; false past the last. */
static bool env_name(const struct opt_def *d, size_t k, char *buf, size_t len) {
  const char *p = d->env;
  for (; p && k; k--) {
    p = strchr(p, '|');
    p = p ? p + 1 : NULL;
  }
  if (!p || !*p)
    return false;
  const char *e = strchr(p, '|');
  size_t n = e ? (size_t)(e - p) : strlen(p);
  snprintf(buf, len, "%.*s", (int)n, p);
  return n < len;
}

/* Names an option for messages: "--grpc-listen (GPUSCALE_GRPC_LISTEN)". */
static void opt_label(const struct opt_def *d, char *buf, size_t len) {
  char env[64];
  if (env_name(d, 0, env, sizeof env))
    snprintf(buf, len, "--%s (%s)", d->name, env);
  else
    snprintf(buf, len, "--%s", d->name);
}

static bool enum_allowed(const char *allowed, const char *v) {
  size_t vl = strlen(v);
  const char *p = allowed;
  while (*p) {
    const char *bar = strchr(p, '|');
    size_t len = bar ? (size_t)(bar - p) : strlen(p);
    if (len == vl && strncmp(p, v, len) == 0)
      return true;
    if (!bar)
      break;
    p = bar + 1;
  }
  return false;
}

static bool addr_valid(const char *v) {
  if (strncmp(v, "unix:", 5) == 0)
    return v[5] != '\0';
  const char *colon = strrchr(v, ':');
  if (!colon || colon == v)
    return false;
  if (v[0] == '[' && colon[-1] != ']')
    return false;
  char *end;
  errno = 0;
  long port = strtol(colon + 1, &end, 10);
  return colon[1] && !*end && !errno && port >= 1 && port <= 65535;
}

static int set_string(char **slot, const char *v) {
  char *c = strdup(v);
  if (!c)
    return GS_ENOMEM;
  free(*slot);
  *slot = c;
  return 0;
}

static int kv_add(struct kv_list *l, const char *item) {
  const char *eq = strchr(item, '=');
  if (!eq || eq == item)
    return GS_EINVAL;
  struct kv *n = realloc(l->items, (l->n + 1) * sizeof *n);
  if (!n)
    return GS_ENOMEM;
  l->items = n;
  char *k = strndup(item, (size_t)(eq - item));
  char *v = strdup(eq + 1);
  if (!k || !v) {
    free(k);
    free(v);
    return GS_ENOMEM;
  }
  l->items[l->n].key = k;
  l->items[l->n].value = v;
  l->n++;
  return 0;
}

static int apply(const struct opt_def *d, void *target, const char *v, const char *source,
                 char *err, size_t errlen) {
  char label[128];
  opt_label(d, label, sizeof label);
  void *f = field(target, d);
  char *end;
  switch (d->type) {
  case OPT_STRING: return set_string((char **)f, v);
  case OPT_ENUM:
    if (!enum_allowed(d->allowed, v)) {
      snprintf(err, errlen, "%s: invalid value \"%s\" from %s; allowed: %s", label, v, source,
               d->allowed);
      return GS_EINVAL;
    }
    return set_string((char **)f, v);
  case OPT_ADDR:
    if (v[0] == ':' && v[1]) { /* ":9400": every IPv4 interface, dcgm-exporter's form (Go's) */
      char full[64];
      snprintf(full, sizeof full, "0.0.0.0%.40s", v);
      if (addr_valid(full))
        return set_string((char **)f, full);
    }
    if (!addr_valid(v)) {
      snprintf(err, errlen,
               "%s: invalid address \"%s\" from %s; expected HOST:PORT with port 1..65535 "
               "(e.g. 0.0.0.0:6000, [::]:6000) or unix:PATH",
               label, v, source);
      return GS_EINVAL;
    }
    return set_string((char **)f, v);
  case OPT_INT: {
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || errno || (double)x < d->min || (double)x > d->max) {
      snprintf(err, errlen, "%s: invalid value \"%s\" from %s; expected an integer in [%.0f, %.0f]",
               label, v, source, d->min, d->max);
      return GS_EINVAL;
    }
    *(long long *)f = x;
    return 0;
  }
  case OPT_DOUBLE: {
    errno = 0;
    double x = strtod(v, &end);
    if (!*v || *end || errno || !isfinite(x) || x < d->min || x > d->max) {
      snprintf(err, errlen, "%s: invalid value \"%s\" from %s; expected a number in [%g, %g]",
               label, v, source, d->min, d->max);
      return GS_EINVAL;
    }
    *(double *)f = x;
    return 0;
  }
  case OPT_DURATION: {
    int64_t ms;
    if (duration_parse_ms(v, &ms) || (double)ms < d->min || (double)ms > d->max) {
      char lo[32], hi[32];
      duration_format((int64_t)d->min, lo, sizeof lo);
      duration_format((int64_t)d->max, hi, sizeof hi);
      snprintf(err, errlen,
               "%s: invalid duration \"%s\" from %s; expected e.g. 500ms, 1s, 10m, 1h, between %s "
               "and %s",
               label, v, source, lo, hi);
      return GS_EINVAL;
    }
    *(int64_t *)f = ms;
    return 0;
  }
  case OPT_BOOL:
    /* and Go's strconv.ParseBool spellings, which dcgm-exporter's variables take */
    if (!strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes") || !strcmp(v, "True") ||
        !strcmp(v, "TRUE") || !strcmp(v, "t") || !strcmp(v, "T"))
      *(bool *)f = true;
    else if (!strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "no") || !strcmp(v, "False") ||
             !strcmp(v, "FALSE") || !strcmp(v, "f") || !strcmp(v, "F"))
      *(bool *)f = false;
    else {
      snprintf(err, errlen, "%s: invalid value \"%s\" from %s; allowed: true, false", label, v,
               source);
      return GS_EINVAL;
    }
    return 0;
  case OPT_KV_LIST: {
    int rc = kv_add((struct kv_list *)f, v);
    if (rc == GS_EINVAL)
      snprintf(err, errlen, "%s: invalid value \"%s\" from %s; expected key=value", label, v,
               source);
    return rc;
  }
  }
  return GS_EINVAL;
}

static const struct opt_def *find_long(const struct opt_def *defs, size_t n, const char *name,
                                       size_t len) {
  for (size_t i = 0; i < n; i++)
    if (strlen(defs[i].name) == len && strncmp(defs[i].name, name, len) == 0)
      return &defs[i];
  return NULL;
}

int config_parse(const struct opt_def *defs, size_t n, int argc, char **argv, int start,
                 void *target, char *err, size_t errlen) {
  int rc;
  for (size_t i = 0; i < n; i++)
    if (defs[i].def && (rc = apply(&defs[i], target, defs[i].def, "default", err, errlen)))
      return rc;
  for (size_t i = 0; i < n; i++) {
    /* the first of the option's variables that is set: ours before dcgm-exporter's alias */
    char name[64];
    for (size_t k = 0; env_name(&defs[i], k, name, sizeof name); k++) {
      const char *ev = getenv(name);
      if (!ev || !*ev)
        continue;
      char src[96];
      snprintf(src, sizeof src, "environment %s", name);
      if ((rc = apply(&defs[i], target, ev, src, err, errlen)))
        return rc;
      break;
    }
  }
  for (int a = start; a < argc; a++) {
    const char *arg = argv[a];
    if (!strcmp(arg, "--help") || !strcmp(arg, "-h"))
      return 1;
    const struct opt_def *d = NULL;
    const char *val = NULL;
    if (arg[0] == '-' && arg[1] == '-' && arg[2]) {
      const char *name = arg + 2;
      const char *eq = strchr(name, '=');
      d = find_long(defs, n, name, eq ? (size_t)(eq - name) : strlen(name));
      if (eq)
        val = eq + 1;
    } else if (arg[0] == '-' && arg[1] && !arg[2]) {
      for (size_t i = 0; i < n; i++)
        if (defs[i].short_name == arg[1])
          d = &defs[i];
    } else {
      snprintf(err, errlen, "unexpected argument \"%s\"; see --help", arg);
      return GS_EINVAL;
    }
    if (!d) {
      snprintf(err, errlen, "unknown option \"%s\"; see --help", arg);
      return GS_EINVAL;
    }
    if (d->type == OPT_BOOL && !val)
      val = "true";
    if (!val) {
      if (a + 1 >= argc) {
        snprintf(err, errlen, "option --%s needs a value (%s)", d->name,
                 d->metavar ? d->metavar : "VALUE");
        return GS_EINVAL;
      }
      val = argv[++a];
    }
    if ((rc = apply(d, target, val, "the command line", err, errlen)))
      return rc;
  }
  return 0;
}

/* Appends to buf at off (clamped), returning the new offset. */
static size_t strappendf(char *buf, size_t len, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static size_t strappendf(char *buf, size_t len, size_t off, const char *fmt, ...) {
  if (off >= len)
    return off;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(buf + off, len - off, fmt, ap);
  va_end(ap);
  if (w < 0)
    return off;
  off += (size_t)w;
  return off < len ? off : len - 1;
}

void config_help(FILE *f, const char *usage, const char *description, const struct opt_def *defs,
                 size_t n) {
  fprintf(f, "Usage: %s\n\n%s\n\nOptions:\n", usage, description);
  for (size_t i = 0; i < n; i++) {
    const struct opt_def *d = &defs[i];
    char flag[96];
    if (d->short_name)
      snprintf(flag, sizeof flag, "-%c, --%s%s%s", d->short_name, d->name, d->metavar ? " " : "",
               d->metavar ? d->metavar : "");
    else
      snprintf(flag, sizeof flag, "    --%s%s%s", d->name, d->metavar ? " " : "",
               d->metavar ? d->metavar : "");
    fprintf(f, "  %-34s %s\n", flag, d->help);
    char extra[256];
    size_t off = 0;
    extra[0] = '\0';
    if (d->type == OPT_ENUM)
      off = strappendf(extra, sizeof extra, off, "one of %s", d->allowed);
    if (d->def)
      off = strappendf(extra, sizeof extra, off, "%sdefault %s", off ? "; " : "", d->def);
    if (d->type == OPT_DURATION) {
      char lo[32], hi[32];
      duration_format((int64_t)d->min, lo, sizeof lo);
      duration_format((int64_t)d->max, hi, sizeof hi);
      off = strappendf(extra, sizeof extra, off, "%s%s..%s", off ? "; " : "", lo, hi);
    } else if (d->type == OPT_INT || d->type == OPT_DOUBLE) {
      off = strappendf(extra, sizeof extra, off, "%s%g..%g", off ? "; " : "", d->min, d->max);
    }
    char env[64];
    for (size_t k = 0; env_name(d, k, env, sizeof env); k++)
      off = strappendf(extra, sizeof extra, off, "%s%s %s",
                       k     ? ", "
                       : off ? "; "
                             : "",
                       k ? "or" : "env", env);
    if (extra[0])
      fprintf(f, "  %-34s [%s]\n", "", extra);
  }
  fprintf(f, "  %-34s %s\n", "-h, --help", "show this help");
}

/* The value of option d in target, as config_log shows it. */
static void format_value(const struct opt_def *d, const void *target, char *v, size_t len) {
  const void *f = cfield(target, d);
  switch (d->type) {
  case OPT_STRING:
  case OPT_ENUM:
  case OPT_ADDR: snprintf(v, len, "%s", *(char *const *)f ? *(char *const *)f : "(unset)"); break;
  case OPT_INT: snprintf(v, len, "%lld", *(const long long *)f); break;
  case OPT_DOUBLE: snprintf(v, len, "%g", *(const double *)f); break;
  case OPT_DURATION: duration_format(*(const int64_t *)f, v, len); break;
  case OPT_BOOL: snprintf(v, len, "%s", *(const bool *)f ? "true" : "false"); break;
  case OPT_KV_LIST: snprintf(v, len, "%zu items", ((const struct kv_list *)f)->n); break;
  }
}

/* The option's default as format_value shows it: parsed into a scratch target of its own. */
static void format_default(const struct opt_def *d, char *v, size_t len) {
  size_t size = d->offset + sizeof(struct kv_list) + sizeof(long long) + sizeof(double);
  void *scratch = calloc(1, size);
  char err[256];
  if (!scratch || (d->def && apply(d, scratch, d->def, "default", err, sizeof err) != 0)) {
    snprintf(v, len, "%s", d->def ? d->def : "");
  } else {
    format_value(d, scratch, v, len);
  }
  if (scratch && (d->type == OPT_STRING || d->type == OPT_ENUM || d->type == OPT_ADDR))
    free(*(char **)field(scratch, d));
  free(scratch);
}

void config_log(const char *module, const struct opt_def *defs, size_t n, const void *target) {
  char changed[1024];
  size_t off = 0, same = 0;
  changed[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    const struct opt_def *d = &defs[i];
    char v[256], def[256];
    format_value(d, target, v, sizeof v);
    LOG_DEBUG(module, "config %s=%s", d->name, v);
    format_default(d, def, sizeof def);
    if (!strcmp(v, def))
      same++;
    else
      off = strappendf(changed, sizeof changed, off, "%s%s=%s", off ? " " : "", d->name, v);
  }
  LOG_INFO(module, "config: %s%s%zu option%s at %s default (--log-level debug lists every option)",
           changed, off ? "; " : "", same, same == 1 ? "" : "s", same == 1 ? "its" : "their");
}

void config_free(const struct opt_def *defs, size_t n, void *target) {
  for (size_t i = 0; i < n; i++) {
    void *f = field(target, &defs[i]);
    switch (defs[i].type) {
    case OPT_STRING:
    case OPT_ENUM:
    case OPT_ADDR:
      free(*(char **)f);
      *(char **)f = NULL;
      break;
    case OPT_KV_LIST: {
      struct kv_list *l = f;
      for (size_t k = 0; k < l->n; k++) {
        free((char *)l->items[k].key);
        free((char *)l->items[k].value);
      }
      free(l->items);
      l->items = NULL;
      l->n = 0;
      break;
    }
    default: break;
    }
  }
}
