/* Which names /metrics writes its DCGM series under, so that one agent serves dashboards written
 * for either dcgm-exporter generation, and a name DCGM renames again is a file away. */
#include "http/dcgm_names.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "http/exposition.h"

#define NAMES_MAX_LINE 512

void dcgm_names_init(struct dcgm_names *n, enum dcgm_gen gen) {
  memset(n, 0, sizeof *n);
  n->gen = gen;
  for (size_t k = 0; k < expo_family_count(); k++) {
    const struct value_family *vf = expo_family_at(k);
    snprintf(n->name[k], sizeof n->name[k], "%s", vf->name[gen]);
    n->help[k] = vf->help[gen];
    (void)expo_family_unit(vf, vf->name[gen], &n->unit[k]); /* the built-in names all fit */
  }
  snprintf(n->driver_label, sizeof n->driver_label, "%s", expo_driver_label[gen]);
}

static bool blank(char c) {
  return c == ' ' || c == '\t';
}

bool dcgm_name_valid(const char *s) {
  if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
    return false;
  for (; *s; s++)
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
          *s == '_'))
      return false;
  return true;
}

/* Copies the blank-trimmed text [s, e) into out; false when it does not fit. */
static bool trimmed(const char *s, const char *e, char *out, size_t len) {
  while (s < e && blank(*s))
    s++;
  while (e > s && blank(e[-1]))
    e--;
  if ((size_t)(e - s) >= len)
    return false;
  memcpy(out, s, (size_t)(e - s));
  out[e - s] = '\0';
  return true;
}

/* The index of the series k whose name in n is name (k != skip), or -1; EXPO_MAX_FAMILIES for the
 * driver label. */
static int name_owner(const struct dcgm_names *n, const char *name, int skip) {
  for (size_t k = 0; k < expo_family_count(); k++)
    if ((int)k != skip && strcmp(n->name[k], name) == 0)
      return (int)k;
  if (skip != EXPO_MAX_FAMILIES && strcmp(n->driver_label, name) == 0)
    return EXPO_MAX_FAMILIES;
  return -1;
}

static int one_line(struct dcgm_names *n, const char *p, const char *e, unsigned line,
                    unsigned *first, const char *src, char *err, size_t errlen) {
  char field[DCGM_NAME_MAX], name[DCGM_NAME_MAX];
  const char *comma = memchr(p, ',', (size_t)(e - p));
  if (!comma || memchr(comma + 1, ',', (size_t)(e - comma - 1))) {
    snprintf(err, errlen, "%s:%u: expected 2 fields (FIELD, NAME)", src, line);
    return GS_EPARSE;
  }
  if (!trimmed(p, comma, field, sizeof field) || !trimmed(comma + 1, e, name, sizeof name)) {
    snprintf(err, errlen, "%s:%u: a name is longer than %d bytes", src, line, DCGM_NAME_MAX - 1);
    return GS_EPARSE;
  }
  int k = expo_family_find(field);
  bool driver = strcmp(field, expo_driver_label[DCGM_GEN_LEGACY]) == 0;
  if ((k < 0 || !expo_family_selectable((size_t)k)) && !driver) {
    snprintf(err, errlen,
             "%s:%u: \"%.64s\" is not a DCGM series gpuscale writes; FIELD is its dcgm-exporter "
             "4.8 name (DCGM_FI_DEV_FB_USED, DCGM_FI_DRIVER_VERSION...)",
             src, line, field);
    return GS_EPARSE;
  }
  int slot = driver ? EXPO_MAX_FAMILIES : k;
  if (first[slot]) {
    snprintf(err, errlen, "%s:%u: %s is listed twice (first on line %u)", src, line, field,
             first[slot]);
    return GS_EPARSE;
  }
  if (!dcgm_name_valid(name)) {
    snprintf(err, errlen, "%s:%u: \"%.64s\" is not a valid %s name (letters, digits, '_')", src,
             line, name, driver ? "label" : "metric");
    return GS_EPARSE;
  }
  int other = name_owner(n, name, slot);
  if (other >= 0) {
    snprintf(err, errlen, "%s:%u: %s is already the name of %s", src, line, name,
             other == EXPO_MAX_FAMILIES ? expo_driver_label[DCGM_GEN_LEGACY]
                                        : expo_family_name((size_t)other));
    return GS_EPARSE;
  }
  first[slot] = line;
  if (driver) {
    snprintf(n->driver_label, sizeof n->driver_label, "%s", name);
    return 0;
  }
  struct expo_unit u;
  if (!expo_family_unit(expo_family_at((size_t)k), name, &u)) {
    snprintf(err, errlen, "%s:%u: %s names a unit that %s's reading is not in", src, line, name,
             field);
    return GS_EPARSE;
  }
  snprintf(n->name[k], sizeof n->name[k], "%s", name);
  n->unit[k] = u;
  n->overridden++;
  return 0;
}

int dcgm_names_parse(const char *text, size_t len, const char *source, struct dcgm_names *n,
                     char *err, size_t errlen) {
  const char *src = source ? source : "names";
  if (len > DCGM_NAMES_MAX_BYTES) {
    snprintf(err, errlen, "%s: larger than %d bytes", src, DCGM_NAMES_MAX_BYTES);
    return GS_ETOOBIG;
  }
  struct dcgm_names *w = malloc(sizeof *w);
  unsigned *first = calloc(EXPO_MAX_FAMILIES + 1, sizeof *first);
  int rc = 0;
  if (!w || !first) {
    snprintf(err, errlen, "%s: out of memory", src);
    rc = GS_ENOMEM;
    goto out;
  }
  *w = *n;
  unsigned line = 0;
  for (const char *p = text, *end = text + len; p < end && !rc;) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *e = nl ? nl : end;
    line++;
    if (e > p && e[-1] == '\r')
      e--;
    const char *q = p;
    while (q < e && blank(*q))
      q++;
    if ((size_t)(e - p) > NAMES_MAX_LINE) {
      snprintf(err, errlen, "%s:%u: line longer than %d bytes", src, line, NAMES_MAX_LINE);
      rc = GS_ETOOBIG;
    } else if (q < e && memchr(q, '\0', (size_t)(e - q))) {
      snprintf(err, errlen, "%s:%u: a NUL byte", src, line);
      rc = GS_EPARSE;
    } else if (q < e && *q != '#') {
      rc = one_line(w, q, e, line, first, src, err, errlen);
    }
    p = nl ? nl + 1 : end;
  }
  if (!rc)
    *n = *w;
out:
  free(w);
  free(first);
  return rc;
}

int dcgm_names_load(const char *path, struct dcgm_names *n, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return GS_EIO;
  }
  char *text = malloc(DCGM_NAMES_MAX_BYTES + 1);
  int rc;
  if (!text) {
    snprintf(err, errlen, "%s: out of memory", path);
    rc = GS_ENOMEM;
  } else {
    size_t len = fread(text, 1, DCGM_NAMES_MAX_BYTES + 1, f);
    if (ferror(f)) {
      snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
      rc = GS_EIO;
    } else {
      rc = dcgm_names_parse(text, len, path, n, err, errlen);
    }
  }
  fclose(f);
  free(text);
  return rc;
}

int dcgm_names_find(const struct dcgm_names *n, const char *name, int *gen) {
  *gen = -1;
  for (size_t k = 0; k < expo_family_count(); k++) {
    const struct value_family *vf = expo_family_at(k);
    bool same = strcmp(vf->name[DCGM_GEN_LEGACY], vf->name[DCGM_GEN_47]) == 0;
    if (n && strcmp(n->name[k], name) == 0) {
      *gen = same && strcmp(name, vf->name[0]) == 0 ? -1 : (int)n->gen;
      return (int)k;
    }
    for (int g = 0; g < DCGM_NGENS; g++)
      if (strcmp(vf->name[g], name) == 0) {
        *gen = same ? -1 : g;
        return (int)k;
      }
  }
  return -1;
}

bool dcgm_names_is_driver(const struct dcgm_names *n, const char *name, int *gen) {
  *gen = -1;
  if (n && strcmp(n->driver_label, name) == 0) {
    *gen = (int)n->gen;
    return true;
  }
  for (int g = 0; g < DCGM_NGENS; g++)
    if (strcmp(expo_driver_label[g], name) == 0) {
      *gen = g;
      return true;
    }
  return false;
}
