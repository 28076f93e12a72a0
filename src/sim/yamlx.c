/* libyaml document helpers with file:line errors for the simulator's inputs. */
#include "sim/yamlx.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

int sim_read_file(const char *path, size_t cap, char **text, size_t *len, char *err,
                  size_t errlen) {
  *text = NULL;
  *len = 0;
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return GS_EIO;
  }
  size_t n = 0, c = 4096;
  char *b = malloc(c + 1);
  int rc = b ? 0 : GS_ENOMEM;
  while (rc == 0) {
    if (n == c) {
      if (c >= cap) { /* a file of exactly cap bytes is fine: over only if one more byte comes */
        if (fgetc(f) == EOF) {
          if (ferror(f)) {
            snprintf(err, errlen, "%s: read failed: %s", path, strerror(errno));
            rc = GS_EIO;
          }
          break;
        }
        snprintf(err, errlen, "%s: larger than the %zu MiB input cap", path, cap >> 20);
        rc = GS_ETOOBIG;
        break;
      }
      c = c * 2 > cap ? cap : c * 2;
      char *nb = realloc(b, c + 1);
      if (!nb) {
        rc = GS_ENOMEM;
        break;
      }
      b = nb;
    }
    size_t got = fread(b + n, 1, c - n, f);
    n += got;
    if (got == 0) {
      if (ferror(f)) {
        snprintf(err, errlen, "%s: read failed: %s", path, strerror(errno));
        rc = GS_EIO;
      }
      break;
    }
  }
  fclose(f);
  if (rc) {
    free(b);
    if (rc == GS_ENOMEM)
      snprintf(err, errlen, "%s: out of memory", path);
    return rc;
  }
  b[n] = '\0';
  *text = b;
  *len = n;
  return 0;
}

/* A failed yaml_parser_load: GS_ENOMEM when libyaml ran out of memory (its loader fails some
 * allocations without recording an error: YAML_NO_ERROR), else GS_EPARSE with file:line. */
static int load_failed(const yaml_parser_t *p, const char *file, char *err, size_t errlen) {
  if (p->error == YAML_MEMORY_ERROR || p->error == YAML_NO_ERROR) {
    snprintf(err, errlen, "%s: out of memory", file);
    return GS_ENOMEM;
  }
  snprintf(err, errlen, "%s:%zu: YAML: %s", file, p->problem_mark.line + 1,
           p->problem ? p->problem : "parse error");
  return GS_EPARSE;
}

int sim_yaml_load(struct sim_yaml *y, const char *text, size_t len, const char *file, char *err,
                  size_t errlen) {
  memset(y, 0, sizeof *y);
  y->file = file;
  yaml_parser_t p;
  if (!yaml_parser_initialize(&p)) {
    snprintf(err, errlen, "%s: out of memory", file);
    return GS_ENOMEM;
  }
  yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
  int rc = 0;
  if (!yaml_parser_load(&p, &y->doc)) {
    rc = load_failed(&p, file, err, errlen);
  } else {
    y->loaded = true;
    if (!yaml_document_get_root_node(&y->doc)) {
      snprintf(err, errlen, "%s: empty document", file);
      rc = GS_EPARSE;
    }
  }
  yaml_parser_delete(&p);
  return rc;
}

int sim_yaml_load_kind(struct sim_yaml *y, const char *text, size_t len, const char *file,
                       const char *kind, char *err, size_t errlen) {
  memset(y, 0, sizeof *y);
  y->file = file;
  yaml_parser_t p;
  if (!yaml_parser_initialize(&p)) {
    snprintf(err, errlen, "%s: out of memory", file);
    return GS_ENOMEM;
  }
  yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
  char seen[256] = "";
  int rc = GS_EINVAL;
  snprintf(err, errlen, "%s: no document of kind %s in the first 256", file, kind);
  for (int docs = 0; docs < 256; docs++) {
    if (!yaml_parser_load(&p, &y->doc)) {
      rc = load_failed(&p, file, err, errlen);
      break;
    }
    y->loaded = true;
    yaml_node_t *root = yaml_document_get_root_node(&y->doc);
    if (!root) { /* the end of the stream */
      snprintf(err, errlen, "%s: no document of kind %s (found: %s)", file, kind,
               seen[0] ? seen : "none");
      break;
    }
    const char *k = sim_yaml_str(sim_yaml_get(y, root, "kind"));
    if (k && strcmp(k, kind) == 0) {
      rc = 0;
      break;
    }
    size_t used = strlen(seen);
    snprintf(seen + used, sizeof seen - used, "%s%.40s", used ? ", " : "", k ? k : "(no kind)");
    sim_yaml_free(y);
  }
  if (rc && y->loaded)
    sim_yaml_free(y);
  yaml_parser_delete(&p);
  return rc;
}

void sim_yaml_free(struct sim_yaml *y) {
  if (y && y->loaded) {
    yaml_document_delete(&y->doc);
    y->loaded = false;
  }
}

yaml_node_t *sim_yaml_root(struct sim_yaml *y) {
  return yaml_document_get_root_node(&y->doc);
}

const char *sim_yaml_str(const yaml_node_t *n) {
  return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

int sim_yaml_line(const yaml_node_t *n) {
  return n ? (int)n->start_mark.line + 1 : 0;
}

yaml_node_t *sim_yaml_get(struct sim_yaml *y, yaml_node_t *map, const char *key) {
  if (!map || map->type != YAML_MAPPING_NODE)
    return NULL;
  yaml_node_t *found = NULL;
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    const char *k = sim_yaml_str(yaml_document_get_node(&y->doc, p->key));
    if (k && strcmp(k, key) == 0)
      found = yaml_document_get_node(&y->doc, p->value); /* the last one wins, as in KEDA */
  }
  return found;
}

size_t sim_yaml_len(const yaml_node_t *seq) {
  return seq && seq->type == YAML_SEQUENCE_NODE
             ? (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start)
             : 0;
}

yaml_node_t *sim_yaml_item(struct sim_yaml *y, yaml_node_t *seq, size_t i) {
  if (i >= sim_yaml_len(seq))
    return NULL;
  return yaml_document_get_node(&y->doc, seq->data.sequence.items.start[i]);
}

int sim_yaml_fail(struct sim_yaml *y, const yaml_node_t *n, const char *key, char *err,
                  size_t errlen, const char *fmt, ...) {
  int w = snprintf(err, errlen, "%s:%d: %s: ", y->file, sim_yaml_line(n), key);
  if (w > 0 && (size_t)w < errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + w, errlen - (size_t)w, fmt, ap);
    va_end(ap);
  }
  return GS_EINVAL;
}

static int parse_number(const char *s, double *out) {
  if (!s || !*s)
    return GS_EINVAL;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || *end || !isfinite(v))
    return GS_EINVAL;
  *out = v;
  return 0;
}

int sim_yaml_num(struct sim_yaml *y, yaml_node_t *n, const char *key, double min, double max,
                 double *out, char *err, size_t errlen) {
  const char *s = sim_yaml_str(n);
  double v;
  if (parse_number(s, &v) || v < min || v > max)
    return sim_yaml_fail(y, n, key, err, errlen, "\"%.40s\": must be a number in [%g, %g]",
                         s ? s : "(not a scalar)", min, max);
  *out = v;
  return 0;
}

int sim_yaml_int(struct sim_yaml *y, yaml_node_t *n, const char *key, long min, long max, long *out,
                 char *err, size_t errlen) {
  const char *s = sim_yaml_str(n);
  double v;
  if (parse_number(s, &v) || v != floor(v) || v < (double)min || v > (double)max)
    return sim_yaml_fail(y, n, key, err, errlen, "\"%.40s\": must be an integer in [%ld, %ld]",
                         s ? s : "(not a scalar)", min, max);
  *out = (long)v;
  return 0;
}

int sim_parse_duration(const char *s, double *out) {
  if (!s || !*s)
    return GS_EINVAL;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || !isfinite(v) || v < 0)
    return GS_EINVAL;
  double mul = 1;
  if (!strcmp(end, "") || !strcmp(end, "s"))
    mul = 1;
  else if (!strcmp(end, "ms"))
    mul = 0.001;
  else if (!strcmp(end, "m"))
    mul = 60;
  else if (!strcmp(end, "h"))
    mul = 3600;
  else if (!strcmp(end, "d"))
    mul = 86400;
  else
    return GS_EINVAL;
  *out = v * mul;
  return 0;
}

int sim_yaml_duration(struct sim_yaml *y, yaml_node_t *n, const char *key, double min, double max,
                      double *out, char *err, size_t errlen) {
  const char *s = sim_yaml_str(n);
  double v;
  if (sim_parse_duration(s, &v) || v < min || v > max)
    return sim_yaml_fail(y, n, key, err, errlen,
                         "\"%.40s\": must be a duration (90, 90s, 2m, 1.5h, 1d) in [%gs, %gs]",
                         s ? s : "(not a scalar)", min, max);
  *out = v;
  return 0;
}

int sim_yaml_enum(struct sim_yaml *y, yaml_node_t *n, const char *key, const char *allowed,
                  int *idx, char *err, size_t errlen) {
  const char *s = sim_yaml_str(n);
  if (s) {
    int i = 0;
    for (const char *a = allowed; *a; i++) {
      const char *bar = strchr(a, '|');
      size_t l = bar ? (size_t)(bar - a) : strlen(a);
      if (strlen(s) == l && strncmp(s, a, l) == 0) {
        *idx = i;
        return 0;
      }
      a += l + (bar ? 1 : 0);
    }
  }
  return sim_yaml_fail(y, n, key, err, errlen, "\"%.40s\": must be one of %s",
                       s ? s : "(not a scalar)", allowed);
}

int sim_yaml_known(struct sim_yaml *y, yaml_node_t *map, const char *what, const char *const *known,
                   char *err, size_t errlen) {
  if (!map)
    return 0;
  if (map->type != YAML_MAPPING_NODE)
    return sim_yaml_fail(y, map, what, err, errlen, "must be a mapping");
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    yaml_node_t *kn = yaml_document_get_node(&y->doc, p->key);
    const char *k = sim_yaml_str(kn);
    bool ok = false;
    for (size_t i = 0; k && known[i]; i++)
      ok = ok || strcmp(k, known[i]) == 0;
    if (!ok) {
      char list[512];
      size_t w = 0;
      list[0] = '\0';
      for (size_t i = 0; known[i] && w < sizeof list; i++)
        w += (size_t)snprintf(list + w, sizeof list - w, "%s%s", i ? ", " : "", known[i]);
      return sim_yaml_fail(y, kn, what, err, errlen, "unknown key \"%.60s\"; allowed: %s",
                           k ? k : "(not a scalar)", list);
    }
  }
  return 0;
}
