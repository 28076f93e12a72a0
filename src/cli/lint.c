/* `gpuscale lint`: the rules of gpuscale's trigger metadata, applied to ScaledObjects before they
 * are applied to a cluster: what the scaler would refuse, typos it would ignore, and the advice
 * that the docs give (docs/lint.md). */
#include "cli/lint.h"

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/lint_load.h"
#include "core/advice.h"
#include "core/config.h"
#include "core/err.h"
#include "core/profile.h"
#include "core/trigger.h"
#include "core/trigger_keys.h"
#include "keda/scaler.h"

struct lint_opts {
  char *format;
  long long port;
  char *profiles;
};

static const struct opt_def lint_defs[] = {
    {"format", 'o', NULL, OPT_ENUM, "text", 0, 0, "text|json", "FORMAT",
     "text: one line per finding, FILE:LINE: severity: what; json: one object with every finding",
     offsetof(struct lint_opts, format)},
    {"port", 0, NULL, OPT_INT, "6000", 1, 65535, NULL, "PORT",
     "the gRPC port of the chart's agent and gateway Services; a scalerAddress naming gpuscale on "
     "another port is an error",
     offsetof(struct lint_opts, port)},
    {"profiles", 0, NULL, OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "your own profiles, as given to the agent's and gateway's --profiles",
     offsetof(struct lint_opts, profiles)},
};
#define NDEFS (sizeof lint_defs / sizeof lint_defs[0])

static const char usage_line[] = "gpuscale lint [OPTIONS] FILE.yaml...";
static const char description[] =
    "Checks the gpuscale triggers (type external or external-push, a scalerAddress naming\n"
    "gpuscale) of every KEDA ScaledObject and ScaledJob in the files, offline, by the rules the\n"
    "agent and gateway apply (docs/lint.md):\n"
    "  errors:   metadata the scaler refuses (INVALID_ARGUMENT), an unknown key that is a typo of\n"
    "            a known one, a value that is not a string, a scalerAddress port that is not the\n"
    "            chart's, a missing scalerAddress\n"
    "  warnings: another unknown key, a pods pattern that matches one whole name only, a profile\n"
    "            advised against for its engine, an engine trigger without spec.fallback or at an\n"
    "            agent, GPU memory in workload scope\n"
    "Exit status: 0 without errors (warnings allowed), 1 with errors, 2 on a usage error.\n\n"
    "Example:  gpuscale lint examples/*.yaml";

enum sev { SEV_ERROR, SEV_WARNING };

struct finding {
  const char *file;
  unsigned line;
  enum sev sev;
  const char *check;
  char object[LINT_NAME_LEN + 96]; /* "ScaledObject ns/name", "" for a file-level finding */
  int trigger;                     /* 1-based, 0 for none */
  /* what the scaler would answer, whole, and the finding around it */
  char msg[SCALER_MSG_LEN + 256];
  size_t seq; /* insertion order, for a stable sort */
};

struct lint_run {
  struct finding *f;
  size_t n, cap;
  size_t errors, warnings, files, objects, triggers;
  bool oom;
};

static struct finding *add(struct lint_run *r, const char *file, unsigned line, enum sev sev,
                           const char *check, const struct lint_object *o, int trigger) {
  if (r->n == r->cap) {
    size_t nc = r->cap ? r->cap * 2 : 16;
    struct finding *nf = realloc(r->f, nc * sizeof *nf);
    if (!nf) {
      r->oom = true;
      return NULL;
    }
    r->f = nf;
    r->cap = nc;
  }
  struct finding *f = &r->f[r->n++];
  memset(f, 0, sizeof *f);
  f->file = file;
  f->line = line;
  f->sev = sev;
  f->check = check;
  if (o)
    snprintf(f->object, sizeof f->object, "%s %s/%s", o->kind, o->ns, o->name);
  f->trigger = trigger;
  if (sev == SEV_ERROR)
    r->errors++;
  else
    r->warnings++;
  return f;
}

#define FINDING(r, file, line, sev, check, o, ti, ...)                                             \
  do {                                                                                             \
    struct finding *f_ = add(r, file, line, sev, check, o, ti);                                    \
    if (f_)                                                                                        \
      snprintf(f_->msg, sizeof f_->msg, __VA_ARGS__);                                              \
  } while (0)

static const char *md_value(const struct lint_trigger *t, const char *key, unsigned *line) {
  const char *v = NULL;
  for (size_t i = 0; i < t->nmd; i++)
    if (!strcmp(t->md[i].key, key)) {
      v = t->md[i].value; /* the last one counts, as in trigger_parse */
      if (line)
        *line = t->md_line[i];
    }
  return v;
}

/* True for a pattern without a regex operator: matched against whole pod names, it selects one
 * pod of exactly that name, never the pods a Deployment names <name>-<hash>-<id>. */
static bool literal_pattern(const char *re) {
  return !strpbrk(re, ".*+?[](){}|\\^$");
}

/* The port of HOST:PORT (or [v6]:PORT), or -1. */
static long port_of(const char *addr) {
  const char *c = strrchr(addr, ':');
  if (!c || strchr(c, ']'))
    return -1;
  char *end = NULL;
  long p = strtol(c + 1, &end, 10);
  return end != c + 1 && !*end ? p : -1;
}

static void check_keys(struct lint_run *r, const char *file, const struct lint_object *o, int ti,
                       const struct lint_trigger *t) {
  for (size_t i = 0; i < t->nmd; i++) {
    const char *k = t->md[i].key;
    if (t->md_unquoted[i])
      FINDING(r, file, t->md_line[i], SEV_ERROR, "not-a-string", o, ti,
              "%s: %s is not a string in YAML: quote it (\"%s\"), Kubernetes refuses it in "
              "metadata",
              k, t->md[i].value[0] ? t->md[i].value : "the empty value", t->md[i].value);
    if (trigger_key_known(k))
      continue;
    const char *s = trigger_key_suggest(k);
    if (s)
      FINDING(r, file, t->md_line[i], SEV_ERROR, "unknown-key", o, ti,
              "unknown key %s (did you mean %s?): gpuscale ignores it, so %s keeps its default", k,
              s, s);
    else
      FINDING(r, file, t->md_line[i], SEV_WARNING, "unknown-key", o, ti,
              "unknown key %s: gpuscale ignores it (docs/profiles.md lists the keys)", k);
  }
}

static void check_parsed(struct lint_run *r, const char *file, const struct lint_object *o, int ti,
                         const struct lint_trigger *t, const struct trigger *tr, bool gateway) {
  unsigned line = t->line;
  const char *pods = md_value(t, "pods", &line);
  if (pods && literal_pattern(pods))
    FINDING(r, file, line, SEV_WARNING, "pods-whole-name", o, ti,
            "pods \"%s\" is matched against whole pod names: it selects only a pod named exactly "
            "%s; for a Deployment's pods write \"%s-.*\"",
            pods, pods, pods);
  const char *profile = md_value(t, "profile", &line);
  const char *why = NULL;
  const struct engine_advice *a = profile ? advice_for_profile(profile, &why) : NULL;
  if (a && why)
    FINDING(r, file, line, SEV_WARNING, "advised-against", o, ti,
            "profile %s is advised against for %s (%s): use profile: %s with %s "
            "(docs/engines.md, \"The recommended trigger per engine\")",
            profile, a->label, why, a->profile, a->keys);
  if (tr->engine && !o->has_fallback)
    FINDING(r, file, t->line, SEV_WARNING, "no-fallback", o, ti,
            "engine trigger without spec.fallback: gpuscale answers UNAVAILABLE, never 0, when "
            "an engine pod cannot be read, and without a fallback KEDA keeps the replicas it has");
  if (tr->engine && !gateway)
    FINDING(r, file, t->line, SEV_WARNING, "engine-at-agent", o, ti,
            "engine trigger at an agent: node scope reads the engine pods of the one node the "
            "call reaches; point scalerAddress at the gateway, with pods");
  char msg[512];
  enum trigger_scope scope = tr->scope;
  if (scope == TRIGGER_SCOPE_AUTO && trigger_selects_pods(tr))
    scope = TRIGGER_SCOPE_WORKLOAD;
  if (!tr->engine && trigger_workload_warning(tr->metric, scope, msg, sizeof msg))
    FINDING(r, file, t->line, SEV_WARNING, "memory-in-workload", o, ti, "%s", msg);
}

static void check_trigger(struct lint_run *r, const struct lint_opts *opt,
                          const struct profile_set *ps, const char *file,
                          const struct lint_object *o, int ti, const struct lint_trigger *t) {
  if (strcmp(t->type, "external") && strcmp(t->type, "external-push"))
    return;
  unsigned line = t->line;
  const char *addr = md_value(t, "scalerAddress", &line);
  if (!addr || !*addr) {
    FINDING(r, file, t->line, SEV_ERROR, "no-scaler-address", o, ti,
            "%s trigger without metadata.scalerAddress: KEDA refuses it", t->type);
    return;
  }
  if (!strstr(addr, "gpuscale"))
    return; /* another external scaler (KEDA's HTTP add-on, say): not ours to judge */
  r->triggers++;
  long port = port_of(addr);
  if (port != opt->port)
    FINDING(r, file, line, SEV_ERROR, "scaler-port", o, ti,
            "scalerAddress %s: the chart's agent and gateway Services serve gRPC on port %lld",
            addr, opt->port);
  check_keys(r, file, o, ti, t);
  struct trigger tr;
  char err[SCALER_MSG_LEN];
  const char *ns = strcmp(o->ns, "") ? o->ns : NULL;
  int rc = trigger_parse_ref(t->md, t->nmd, ps, ns, &tr, err, sizeof err);
  if (rc) {
    FINDING(r, file, t->line, SEV_ERROR, "invalid", o, ti,
            "the scaler answers INVALID_ARGUMENT: %s", err);
    return;
  }
  bool gateway = strstr(addr, "gateway") != NULL;
  check_parsed(r, file, o, ti, t, &tr, gateway);
  trigger_free(&tr);
}

/* Findings of one file in line order; those of one line in the order they were found. */
static int by_line(const void *a, const void *b) {
  const struct finding *x = a, *y = b;
  if (x->line != y->line)
    return x->line < y->line ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void lint_path(struct lint_run *r, const struct lint_opts *opt, const struct profile_set *ps,
                      const char *path) {
  struct lint_file lf;
  char err[512] = "";
  r->files++;
  size_t first = r->n;
  int rc = lint_load(path, &lf, err, sizeof err);
  for (size_t i = 0; i < lf.nobj; i++) {
    r->objects++;
    for (size_t j = 0; j < lf.obj[i].ntrig; j++)
      check_trigger(r, opt, ps, path, &lf.obj[i], (int)j + 1, &lf.obj[i].trig[j]);
  }
  if (rc == GS_ENOMEM)
    r->oom = true;
  else if (rc)
    FINDING(r, path, lf.err_line, SEV_ERROR, rc == GS_EPARSE ? "yaml" : "read", NULL, 0, "%s", err);
  lint_file_free(&lf);
  /* qsort's order of equal elements is unspecified: ties keep insertion order by the index. */
  if (r->n - first < 2)
    return;
  for (size_t i = first; i < r->n; i++)
    r->f[i].seq = i;
  qsort(r->f + first, r->n - first, sizeof *r->f, by_line);
}

static void print_text(const struct lint_run *r) {
  for (size_t i = 0; i < r->n; i++) {
    const struct finding *f = &r->f[i];
    printf("%s:%u: %s: ", f->file, f->line, f->sev == SEV_ERROR ? "error" : "warning");
    if (f->object[0])
      printf("%s, trigger %d: ", f->object, f->trigger);
    printf("%s [%s]\n", f->msg, f->check);
  }
  fflush(stdout); /* the summary comes last, also when both go to one terminal or file */
  fprintf(stderr,
          "gpuscale lint: %zu file%s, %zu ScaledObject%s, %zu gpuscale trigger%s: %zu error%s, "
          "%zu warning%s\n",
          r->files, r->files == 1 ? "" : "s", r->objects, r->objects == 1 ? "" : "s", r->triggers,
          r->triggers == 1 ? "" : "s", r->errors, r->errors == 1 ? "" : "s", r->warnings,
          r->warnings == 1 ? "" : "s");
}

static int print_json(const struct lint_run *r) {
  struct json_object *root = json_object_new_object(), *arr = json_object_new_array();
  if (!root || !arr) {
    json_object_put(root);
    json_object_put(arr);
    return GS_ENOMEM;
  }
  for (size_t i = 0; i < r->n; i++) {
    const struct finding *f = &r->f[i];
    struct json_object *o = json_object_new_object();
    if (!o)
      break;
    json_object_object_add(o, "file", json_object_new_string(f->file));
    json_object_object_add(o, "line", json_object_new_int((int)f->line));
    json_object_object_add(o, "severity",
                           json_object_new_string(f->sev == SEV_ERROR ? "error" : "warning"));
    json_object_object_add(o, "check", json_object_new_string(f->check));
    json_object_object_add(o, "object", json_object_new_string(f->object));
    json_object_object_add(o, "trigger", json_object_new_int(f->trigger));
    json_object_object_add(o, "message", json_object_new_string(f->msg));
    json_object_array_add(arr, o);
  }
  json_object_object_add(root, "files", json_object_new_int64((int64_t)r->files));
  json_object_object_add(root, "objects", json_object_new_int64((int64_t)r->objects));
  json_object_object_add(root, "triggers", json_object_new_int64((int64_t)r->triggers));
  json_object_object_add(root, "errors", json_object_new_int64((int64_t)r->errors));
  json_object_object_add(root, "warnings", json_object_new_int64((int64_t)r->warnings));
  json_object_object_add(root, "findings", arr);
  puts(json_object_to_json_string_ext(root,
                                      JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
  json_object_put(root);
  return 0;
}

/* The option table parses flags only: FILE arguments are taken out of argv first. A flag that
 * takes a value and has no "=VALUE" takes the next argument with it. */
static bool takes_value(const char *arg) {
  for (size_t i = 0; i < NDEFS; i++) {
    const struct opt_def *d = &lint_defs[i];
    size_t n = strlen(d->name);
    bool lng = !strncmp(arg, "--", 2) && !strncmp(arg + 2, d->name, n) && !arg[2 + n];
    bool sht = d->short_name && arg[0] == '-' && arg[1] == d->short_name && !arg[2];
    if (lng || sht)
      return d->type != OPT_BOOL;
  }
  return false;
}

int lint_main(int argc, char **argv) {
  char **flags = calloc((size_t)argc + 1, sizeof *flags);
  const char **files = calloc((size_t)argc + 1, sizeof *files);
  if (!flags || !files) {
    free(flags);
    free(files);
    fprintf(stderr, "gpuscale lint: out of memory\n");
    return 1;
  }
  int nflags = 0, nfiles = 0;
  flags[nflags++] = argv[0];
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] == '-' && argv[i][1]) {
      flags[nflags++] = argv[i];
      if (takes_value(argv[i]) && i + 1 < argc)
        flags[nflags++] = argv[++i];
    } else {
      files[nfiles++] = argv[i];
    }
  }
  struct lint_opts o;
  memset(&o, 0, sizeof o);
  char err[512];
  int rc = config_parse(lint_defs, NDEFS, nflags, flags, 1, &o, err, sizeof err);
  int status = 0;
  struct profile_set ps = {0};
  if (rc == 1) {
    config_help(stdout, usage_line, description, lint_defs, NDEFS);
    goto out;
  }
  if (rc == 0 && !nfiles) {
    snprintf(err, sizeof err, "give at least one FILE.yaml (see --help)");
    rc = GS_EINVAL;
  }
  if (rc == 0 && profile_set_init(&ps)) {
    snprintf(err, sizeof err, "out of memory");
    rc = GS_ENOMEM;
  }
  if (rc == 0 && o.profiles && profile_set_load(&ps, o.profiles, err, sizeof err))
    rc = GS_EINVAL;
  if (rc) {
    fprintf(stderr, "gpuscale lint: %s\n", err);
    status = 2;
    goto out;
  }
  struct lint_run r = {0};
  for (int i = 0; i < nfiles && !r.oom; i++)
    lint_path(&r, &o, &ps, files[i]);
  if (r.oom || (!strcmp(o.format, "json") ? print_json(&r) : (print_text(&r), 0))) {
    fprintf(stderr, "gpuscale lint: out of memory\n");
    status = 1;
  } else {
    status = r.errors ? 1 : 0;
  }
  free(r.f);
out:
  profile_set_free(&ps);
  config_free(lint_defs, NDEFS, &o);
  free(flags);
  free(files);
  return status;
}
