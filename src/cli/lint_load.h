/* Reads the KEDA ScaledObjects and ScaledJobs of Kubernetes YAML files (any number of documents
 * per file) into plain structs with line numbers, for `gpuscale lint`. Nothing here judges a
 * trigger: lint.c does. */
#ifndef GS_LINT_LOAD_H
#define GS_LINT_LOAD_H

#include <stdbool.h>
#include <stddef.h>

#include "core/trigger.h" /* struct kv */

#define LINT_FILE_MAX (4 * 1024 * 1024) /* bigger files are refused: these are manifests */
#define LINT_NAME_LEN 254

struct lint_trigger {
  unsigned line; /* 1-based line of the trigger's first key */
  char type[64]; /* external, external-push, prometheus... */
  struct kv *md; /* metadata, keys and values owned; values of non-scalar nodes are "" */
  unsigned *md_line;
  bool *md_unquoted; /* a plain scalar YAML reads as a number, boolean or null: not a string */
  size_t nmd;
};

struct lint_object {
  unsigned line; /* 1-based line where the document starts */
  char kind[32]; /* ScaledObject or ScaledJob */
  char ns[64];   /* metadata.namespace, "default" when absent */
  char name[LINT_NAME_LEN];
  bool has_fallback; /* spec.fallback is set */
  struct lint_trigger *trig;
  size_t ntrig;
};

struct lint_file {
  struct lint_object *obj;
  size_t nobj;
  size_t ndocs;      /* documents read, of any kind */
  unsigned err_line; /* 1-based line of a YAML error; 0 when none, or the file could not be read */
};

/* Loads path. Returns 0; GS_EIO when it cannot be read (or is over LINT_FILE_MAX), GS_EPARSE on a
 * YAML error (its line in out->err_line), with what went wrong in err; GS_ENOMEM. On error *out
 * holds the objects of the documents before the bad one. Free with lint_file_free either way. */
int lint_load(const char *path, struct lint_file *out, char *err, size_t errlen);
/* The same from memory (len bytes, no NUL needed), for the fuzz target. */
int lint_load_mem(const char *data, size_t len, struct lint_file *out, char *err, size_t errlen);
void lint_file_free(struct lint_file *f);

#endif
