/* The reader of dcgm-exporter's counters CSV, so that the file users keep for dcgm-exporter picks
 * gpuscale's series too; a field gpuscale cannot serve is reported, never silently dropped. */
#include "http/counters.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "http/dcgm_names.h"

#define NAME_MAX_LEN 128

/* One record's fields, as copies without quotes and surrounding blanks. */
struct record {
  char f[3][COUNTERS_HELP_MAX + 1];
  size_t n;
};

static bool blank(char c) {
  return c == ' ' || c == '\t';
}

/* Splits one line (no newline) into at most 3 fields. Returns NULL or a fixed complaint. */
static const char *split_line(const char *p, const char *end, struct record *r) {
  r->n = 0;
  for (;;) {
    while (p < end && blank(*p))
      p++;
    if (r->n == 3)
      return "more than 3 fields (a HELP text with a comma must be in double quotes)";
    char *out = r->f[r->n];
    size_t o = 0;
    if (p < end && *p == '"') {
      for (p++;; p++) {
        if (p >= end)
          return "a quoted field has no closing quote";
        if (*p == '"' && p + 1 < end && p[1] == '"')
          p++; /* "" is one quote */
        else if (*p == '"')
          break;
        if (o >= COUNTERS_HELP_MAX)
          return "a field is longer than 256 bytes";
        out[o++] = *p;
      }
      for (p++; p < end && blank(*p);)
        p++;
      if (p < end && *p != ',')
        return "text after a closing quote";
    } else {
      const char *s = p;
      while (p < end && *p != ',') {
        if (*p == '"')
          return "a '\"' inside an unquoted field";
        p++;
      }
      const char *e = p;
      while (e > s && blank(e[-1]))
        e--;
      if ((size_t)(e - s) > COUNTERS_HELP_MAX)
        return "a field is longer than 256 bytes";
      memcpy(out, s, (size_t)(e - s));
      o = (size_t)(e - s);
    }
    out[o] = '\0';
    r->n++;
    if (p >= end)
      return NULL;
    p++; /* the comma */
  }
}

static void add_unserved(struct counters *c, const char *name) {
  size_t len = strlen(c->unserved);
  c->n_unserved++;
  /* already cut: a name never contains '.' */
  if (len >= sizeof c->unserved - 5 || (len >= 3 && strcmp(c->unserved + len - 3, "...") == 0))
    return;
  int w = snprintf(c->unserved + len, sizeof c->unserved - len, "%s%s", len ? ", " : "", name);
  if (w < 0 || (size_t)w >= sizeof c->unserved - len - 4) {
    c->unserved[len] = '\0';
    snprintf(c->unserved + len, sizeof c->unserved - len, "%s...", len ? ", " : "");
  }
}

/* Where each name was first seen, to name both lines of a duplicate. */
struct seen {
  char name[NAME_MAX_LEN];
  unsigned line;
};

/* A name that belongs to one generation: the file's generation, or a mix (an error). */
static int note_gen(struct counters *c, int gen, const char *name, unsigned line, const char *src,
                    char *err, size_t errlen) {
  if (gen < 0)
    return 0;
  if (c->gen < 0) {
    c->gen = gen;
    c->gen_line = line;
    snprintf(c->gen_name, sizeof c->gen_name, "%.*s", (int)sizeof c->gen_name - 1, name);
    return 0;
  }
  if (c->gen == gen)
    return 0;
  snprintf(err, errlen,
           "%s:%u: %s is a %s name, but line %u's %s is a %s name: a counters file lists one "
           "generation of dcgm-exporter's names",
           src, line, name, dcgm_gen_name((enum dcgm_gen)gen), c->gen_line, c->gen_name,
           dcgm_gen_name((enum dcgm_gen)c->gen));
  return GS_EPARSE;
}

static int one_record(struct counters *c, const struct record *r, unsigned line, struct seen *seen,
                      size_t nseen, const struct dcgm_names *names, const char *src, char *err,
                      size_t errlen) {
  const char *name = r->f[0], *type = r->f[1], *help = r->f[2];
  if (r->n != 3) {
    snprintf(err, errlen, "%s:%u: expected 3 fields (NAME, TYPE, HELP), found %zu", src, line,
             r->n);
    return GS_EPARSE;
  }
  if (strlen(name) >= NAME_MAX_LEN || !dcgm_name_valid(name)) {
    snprintf(err, errlen, "%s:%u: \"%.64s\" is not a metric name (letters, digits, '_')", src, line,
             name);
    return GS_EPARSE;
  }
  for (size_t i = 0; i < nseen; i++)
    if (strcmp(seen[i].name, name) == 0) {
      snprintf(err, errlen, "%s:%u: %s is listed twice (first on line %u)", src, line, name,
               seen[i].line);
      return GS_EPARSE;
    }
  bool is_label = strcmp(type, "label") == 0;
  bool is_value = strcmp(type, "gauge") == 0 || strcmp(type, "counter") == 0;
  bool other = strcmp(type, "histogram") == 0 || strcmp(type, "summary") == 0;
  int gen = -1;
  int k = dcgm_names_find(names, name, &gen);
  if (k >= 0 && expo_family_selectable((size_t)k)) {
    if (!is_value) {
      snprintf(err, errlen, "%s:%u: type \"%.32s\" for %s; allowed: gauge, counter", src, line,
               type, name);
      return GS_EPARSE;
    }
    int rc = note_gen(c, gen, name, line, src, err, errlen);
    if (rc)
      return rc;
    if (c->on >> k & 1) { /* one series under two of its names */
      snprintf(err, errlen, "%s:%u: %s is %s again", src, line, name, expo_family_name((size_t)k));
      return GS_EPARSE;
    }
    c->on |= UINT64_C(1) << k;
    snprintf(c->type[k], sizeof c->type[k], "%.7s", type); /* gauge or counter */
    snprintf(c->help[k], sizeof c->help[k], "%.*s", COUNTERS_HELP_MAX, help);
  } else if (dcgm_names_is_driver(names, name, &gen)) {
    if (!is_label) {
      snprintf(err, errlen, "%s:%u: type \"%.32s\" for %s; allowed: label", src, line, type, name);
      return GS_EPARSE;
    }
    if (c->driver_version) {
      snprintf(err, errlen, "%s:%u: %s: the driver version label is listed twice", src, line, name);
      return GS_EPARSE;
    }
    int rc = note_gen(c, gen, name, line, src, err, errlen);
    if (rc)
      return rc;
    c->driver_version = true;
  } else if (strcmp(name, "DCGM_EXP_XID_ERRORS_COUNT") == 0 ||
             strcmp(name, "DCGM_EXP_CLOCK_EVENTS_COUNT") == 0) {
    if (!is_value) {
      snprintf(err, errlen, "%s:%u: type \"%.32s\" for %s; allowed: gauge, counter", src, line,
               type, name);
      return GS_EPARSE;
    }
    bool xid = strcmp(name, "DCGM_EXP_XID_ERRORS_COUNT") == 0;
    *(xid ? &c->exp_xid : &c->exp_clock) = true;
    snprintf(xid ? c->exp_xid_type : c->exp_clock_type, sizeof c->exp_xid_type, "%.7s", type);
    snprintf(xid ? c->exp_xid_help : c->exp_clock_help, sizeof c->exp_xid_help, "%.*s",
             COUNTERS_HELP_MAX, help);
  } else if (k >= 0) {
    snprintf(err, errlen,
             "%s:%u: %s is gpuscale's own series, always written; the file lists DCGM fields "
             "(DCGM_FI_*, DCGM_EXP_*)",
             src, line, name);
    return GS_EPARSE;
  } else if (strncmp(name, "DCGM_FI_", 8) == 0 || strncmp(name, "DCGM_EXP_", 9) == 0) {
    if (!is_value && !is_label && !other) {
      snprintf(err, errlen,
               "%s:%u: type \"%.32s\" for %s; allowed: gauge, counter, histogram, summary, label",
               src, line, type, name);
      return GS_EPARSE;
    }
    add_unserved(c, name);
  } else {
    snprintf(err, errlen, "%s:%u: %s is not a DCGM field name (DCGM_FI_... or DCGM_EXP_...)", src,
             line, name);
    return GS_EPARSE;
  }
  c->n_records++;
  return 0;
}

int counters_parse(const char *text, size_t len, const char *source, struct counters *out,
                   char *err, size_t errlen) {
  return counters_parse_names(text, len, source, NULL, out, err, errlen);
}

int counters_parse_names(const char *text, size_t len, const char *source,
                         const struct dcgm_names *names, struct counters *out, char *err,
                         size_t errlen) {
  const char *src = source ? source : "counters";
  if (len > COUNTERS_MAX_BYTES) {
    snprintf(err, errlen, "%s: larger than %d bytes", src, COUNTERS_MAX_BYTES);
    return GS_ETOOBIG;
  }
  struct counters *c = calloc(1, sizeof *c);
  struct seen *seen = calloc(COUNTERS_MAX_RECORDS, sizeof *seen);
  struct record *r = malloc(sizeof *r);
  int rc = GS_ENOMEM;
  if (!c || !seen || !r) {
    snprintf(err, errlen, "%s: out of memory", src);
    goto out;
  }
  rc = 0;
  c->gen = -1;
  size_t nseen = 0;
  unsigned line = 0;
  for (const char *p = text, *end = text + len; p < end && !rc;) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *e = nl ? nl : end;
    line++;
    if (e > p && e[-1] == '\r')
      e--;
    if ((size_t)(e - p) > COUNTERS_MAX_LINE) {
      snprintf(err, errlen, "%s:%u: line longer than %d bytes", src, line, COUNTERS_MAX_LINE);
      rc = GS_ETOOBIG;
      break;
    }
    const char *q = p;
    while (q < e && blank(*q))
      q++;
    if (q < e && *q != '#' && memchr(q, '\0', (size_t)(e - q))) {
      snprintf(err, errlen, "%s:%u: a NUL byte", src, line);
      rc = GS_EPARSE;
    } else if (q < e && *q != '#') {
      const char *why = split_line(q, e, r);
      if (why) {
        snprintf(err, errlen, "%s:%u: %s", src, line, why);
        rc = GS_EPARSE;
      } else if (nseen == COUNTERS_MAX_RECORDS) {
        snprintf(err, errlen, "%s:%u: more than %d records", src, line, COUNTERS_MAX_RECORDS);
        rc = GS_ETOOBIG;
      } else if ((rc = one_record(c, r, line, seen, nseen, names, src, err, errlen)) == 0) {
        /* (a DCGM field name: always shorter; the precision tells -Wformat-truncation) */
        snprintf(seen[nseen].name, sizeof seen[nseen].name, "%.*s",
                 (int)sizeof seen[nseen].name - 1, r->f[0]);
        seen[nseen++].line = line;
      }
    }
    p = nl ? nl + 1 : end;
  }
  if (!rc && nseen == 0) {
    snprintf(err, errlen, "%s: no counters (every line is blank or a '#' comment)", src);
    rc = GS_EPARSE;
  }
  if (!rc)
    *out = *c;
out:
  free(c);
  free(seen);
  free(r);
  return rc;
}

int counters_load(const char *path, struct counters *out, char *err, size_t errlen) {
  return counters_load_names(path, NULL, out, err, errlen);
}

int counters_load_names(const char *path, const struct dcgm_names *names, struct counters *out,
                        char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return GS_EIO;
  }
  char *text = malloc(COUNTERS_MAX_BYTES + 1);
  if (!text) {
    fclose(f);
    snprintf(err, errlen, "%s: out of memory", path);
    return GS_ENOMEM;
  }
  size_t n = fread(text, 1, COUNTERS_MAX_BYTES + 1, f);
  int rc;
  if (ferror(f)) {
    snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
    rc = GS_EIO;
  } else {
    rc = counters_parse_names(text, n, path, names, out, err, errlen);
  }
  fclose(f);
  free(text);
  return rc;
}

bool counters_on(const struct counters *c, size_t k) {
  if (k >= expo_family_count())
    return false;
  if (!expo_family_selectable(k))
    return true;
  if (!c)
    return expo_family_default(k);
  return (c->on >> k) & 1;
}
