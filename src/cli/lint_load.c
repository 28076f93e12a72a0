/* ScaledObjects and ScaledJobs out of Kubernetes YAML, with line numbers, for `gpuscale lint`. */
#include "cli/lint_load.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <yaml.h>

#include "core/err.h"

static const char *scalar(yaml_node_t *n) {
  return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static yaml_node_t *get(yaml_document_t *d, yaml_node_t *map, const char *key) {
  if (!map || map->type != YAML_MAPPING_NODE)
    return NULL;
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    const char *k = scalar(yaml_document_get_node(d, p->key));
    if (k && !strcmp(k, key))
      return yaml_document_get_node(d, p->value);
  }
  return NULL;
}

/* A plain (unquoted) scalar that YAML 1.1 reads as a number, a boolean or null: Kubernetes then
 * refuses it where a string is required, as in a trigger's metadata. */
static bool not_a_string(yaml_node_t *n) {
  if (!n || n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
    return false;
  const char *s = (const char *)n->data.scalar.value;
  static const char *const words[] = {"true", "false", "yes", "no", "on",
                                      "off",  "null",  "~",   "y",  "n"};
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
    if (!strcasecmp(s, words[i]))
      return true;
  if (!*s)
    return true; /* an empty plain value is null */
  char *end = NULL;
  errno = 0;
  (void)strtod(s, &end);
  return end != s && !*end;
}

static void copy(char *dst, size_t len, const char *src) {
  snprintf(dst, len, "%s", src ? src : "");
}

static int load_trigger(yaml_document_t *d, yaml_node_t *item, struct lint_trigger *t) {
  memset(t, 0, sizeof *t);
  t->line = (unsigned)item->start_mark.line + 1;
  copy(t->type, sizeof t->type, scalar(get(d, item, "type")));
  yaml_node_t *md = get(d, item, "metadata");
  if (!md || md->type != YAML_MAPPING_NODE)
    return 0;
  size_t n = (size_t)(md->data.mapping.pairs.top - md->data.mapping.pairs.start);
  t->md = calloc(n ? n : 1, sizeof *t->md);
  t->md_line = calloc(n ? n : 1, sizeof *t->md_line);
  t->md_unquoted = calloc(n ? n : 1, sizeof *t->md_unquoted);
  if (!t->md || !t->md_line || !t->md_unquoted)
    return GS_ENOMEM;
  for (yaml_node_pair_t *p = md->data.mapping.pairs.start; p < md->data.mapping.pairs.top; p++) {
    yaml_node_t *k = yaml_document_get_node(d, p->key), *v = yaml_document_get_node(d, p->value);
    const char *ks = scalar(k), *vs = scalar(v);
    char *kc = strdup(ks ? ks : ""), *vc = strdup(vs ? vs : "");
    if (!kc || !vc) {
      free(kc);
      free(vc);
      return GS_ENOMEM;
    }
    t->md[t->nmd] = (struct kv){kc, vc};
    t->md_line[t->nmd] = k ? (unsigned)k->start_mark.line + 1 : t->line;
    t->md_unquoted[t->nmd] = not_a_string(v);
    t->nmd++;
  }
  return 0;
}

/* One document: a ScaledObject or ScaledJob of keda.sh is added to f; anything else is skipped. */
static int load_doc(yaml_document_t *d, struct lint_file *f) {
  yaml_node_t *root = yaml_document_get_root_node(d);
  if (!root)
    return 0;
  f->ndocs++;
  const char *api = scalar(get(d, root, "apiVersion")), *kind = scalar(get(d, root, "kind"));
  if (!api || strncmp(api, "keda.sh/", 8) || !kind ||
      (strcmp(kind, "ScaledObject") && strcmp(kind, "ScaledJob")))
    return 0;
  struct lint_object *no = realloc(f->obj, (f->nobj + 1) * sizeof *no);
  if (!no)
    return GS_ENOMEM;
  f->obj = no;
  struct lint_object *o = &f->obj[f->nobj++];
  memset(o, 0, sizeof *o);
  o->line = (unsigned)root->start_mark.line + 1;
  copy(o->kind, sizeof o->kind, kind);
  yaml_node_t *meta = get(d, root, "metadata");
  const char *ns = scalar(get(d, meta, "namespace"));
  copy(o->ns, sizeof o->ns, ns && *ns ? ns : "default");
  copy(o->name, sizeof o->name, scalar(get(d, meta, "name")));
  yaml_node_t *spec = get(d, root, "spec");
  o->has_fallback = get(d, spec, "fallback") != NULL;
  yaml_node_t *trs = get(d, spec, "triggers");
  if (!trs || trs->type != YAML_SEQUENCE_NODE)
    return 0;
  size_t n = (size_t)(trs->data.sequence.items.top - trs->data.sequence.items.start);
  o->trig = calloc(n ? n : 1, sizeof *o->trig);
  if (!o->trig)
    return GS_ENOMEM;
  for (yaml_node_item_t *it = trs->data.sequence.items.start; it < trs->data.sequence.items.top;
       it++) {
    yaml_node_t *item = yaml_document_get_node(d, *it);
    if (!item || item->type != YAML_MAPPING_NODE)
      continue;
    int rc = load_trigger(d, item, &o->trig[o->ntrig]);
    o->ntrig++; /* counted even on ENOMEM, so that lint_file_free frees what was copied */
    if (rc)
      return rc;
  }
  return 0;
}

/* Every document of the parser's input into out. */
static int load_all(yaml_parser_t *parser, struct lint_file *out, char *err, size_t errlen) {
  for (;;) {
    yaml_document_t doc;
    if (!yaml_parser_load(parser, &doc)) {
      out->err_line = (unsigned)parser->problem_mark.line + 1;
      snprintf(err, errlen, "not YAML: %s", parser->problem ? parser->problem : "a syntax error");
      return GS_EPARSE;
    }
    bool empty = yaml_document_get_root_node(&doc) == NULL;
    int rc = empty ? 0 : load_doc(&doc, out);
    yaml_document_delete(&doc);
    if (empty || rc)
      return rc; /* an empty document is the end of the stream */
  }
}

int lint_load_mem(const char *data, size_t len, struct lint_file *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  if (len > LINT_FILE_MAX) {
    snprintf(err, errlen, "%zu bytes: over the %d MiB a manifest may have", len,
             LINT_FILE_MAX / (1024 * 1024));
    return GS_EIO;
  }
  yaml_parser_t parser;
  if (!yaml_parser_initialize(&parser))
    return GS_ENOMEM;
  yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
  int rc = load_all(&parser, out, err, errlen);
  yaml_parser_delete(&parser);
  return rc;
}

int lint_load(const char *path, struct lint_file *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    snprintf(err, errlen, "cannot open: %s", strerror(errno));
    return GS_EIO;
  }
  struct stat st;
  if (fstat(fileno(fp), &st) == 0 && st.st_size > LINT_FILE_MAX) {
    snprintf(err, errlen, "%lld bytes: over the %d MiB a manifest may have", (long long)st.st_size,
             LINT_FILE_MAX / (1024 * 1024));
    fclose(fp);
    return GS_EIO;
  }
  yaml_parser_t parser;
  if (!yaml_parser_initialize(&parser)) {
    fclose(fp);
    return GS_ENOMEM;
  }
  yaml_parser_set_input_file(&parser, fp);
  int rc = load_all(&parser, out, err, errlen);
  yaml_parser_delete(&parser);
  fclose(fp);
  return rc;
}

void lint_file_free(struct lint_file *f) {
  if (!f)
    return;
  for (size_t i = 0; i < f->nobj; i++) {
    struct lint_object *o = &f->obj[i];
    for (size_t j = 0; j < o->ntrig; j++) {
      struct lint_trigger *t = &o->trig[j];
      for (size_t k = 0; k < t->nmd; k++) {
        free((char *)t->md[k].key);
        free((char *)t->md[k].value);
      }
      free(t->md);
      free(t->md_line);
      free(t->md_unquoted);
    }
    free(o->trig);
  }
  free(f->obj);
  memset(f, 0, sizeof *f);
}
