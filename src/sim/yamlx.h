/* Small libyaml document helpers for the simulator's input files: keyed lookups and typed
 * scalars whose errors name file:line, the key, the bad value and what is allowed. */
#ifndef GS_SIM_YAMLX_H
#define GS_SIM_YAMLX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

#define SIM_INPUT_MAX (16u << 20) /* every input file is capped at 16 MiB */

struct sim_yaml {
  yaml_document_t doc;
  const char *file; /* for messages; not owned */
  bool loaded;
};

/* Reads a whole file of at most cap bytes into *text (NUL-terminated; free() it). Returns 0,
 * GS_EIO (err names the file and the reason) or GS_ETOOBIG. */
int sim_read_file(const char *path, size_t cap, char **text, size_t *len, char *err, size_t errlen);
/* Parses the first document of text. Returns 0, GS_EPARSE (err: file:line: problem) or
 * GS_ENOMEM; release with sim_yaml_free (also after a failure). */
int sim_yaml_load(struct sim_yaml *y, const char *text, size_t len, const char *file, char *err,
                  size_t errlen);
/* As sim_yaml_load, for a multi-document stream: keeps the first document whose root has
 * "kind: <kind>" (a manifest file may hold a Deployment and a TriggerAuthentication too). When
 * none has it, GS_EINVAL with err naming the kinds found. */
int sim_yaml_load_kind(struct sim_yaml *y, const char *text, size_t len, const char *file,
                       const char *kind, char *err, size_t errlen);
void sim_yaml_free(struct sim_yaml *y);
yaml_node_t *sim_yaml_root(struct sim_yaml *y);
/* The value under key in a mapping node, or NULL (absent, or n not a mapping). */
yaml_node_t *sim_yaml_get(struct sim_yaml *y, yaml_node_t *map, const char *key);
/* A scalar's text, or NULL for a mapping or sequence. */
const char *sim_yaml_str(const yaml_node_t *n);
/* 1-based line of a node. */
int sim_yaml_line(const yaml_node_t *n);
/* Item i of a sequence node, or NULL. */
yaml_node_t *sim_yaml_item(struct sim_yaml *y, yaml_node_t *seq, size_t i);
size_t sim_yaml_len(const yaml_node_t *seq);
/* Errors for a node: "file:line: key: message". */
int sim_yaml_fail(struct sim_yaml *y, const yaml_node_t *n, const char *key, char *err,
                  size_t errlen, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* A number in [min, max]. Returns 0 or GS_EINVAL naming file:line, key, value and range. */
int sim_yaml_num(struct sim_yaml *y, yaml_node_t *n, const char *key, double min, double max,
                 double *out, char *err, size_t errlen);
int sim_yaml_int(struct sim_yaml *y, yaml_node_t *n, const char *key, long min, long max, long *out,
                 char *err, size_t errlen);
/* A duration ("90", "90s", "2m", "1.5h", "1d") in seconds within [min, max]. */
int sim_yaml_duration(struct sim_yaml *y, yaml_node_t *n, const char *key, double min, double max,
                      double *out, char *err, size_t errlen);
/* One of allowed ("a|b|c"); *idx is its position. */
int sim_yaml_enum(struct sim_yaml *y, yaml_node_t *n, const char *key, const char *allowed,
                  int *idx, char *err, size_t errlen);
/* Refuses a key of map not in known (NULL-terminated), naming it and the allowed keys. */
int sim_yaml_known(struct sim_yaml *y, yaml_node_t *map, const char *what, const char *const *known,
                   char *err, size_t errlen);
/* Parses a duration string into seconds; returns 0 or GS_EINVAL. */
int sim_parse_duration(const char *s, double *out);

#endif
