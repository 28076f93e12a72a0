/* One option table drives flags, environment overrides, validation, --help and the start-up log. */
#ifndef GS_CONFIG_H
#define GS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/trigger.h" /* struct kv */

enum opt_type {
  OPT_STRING,   /* target: char * (owned copy) */
  OPT_ENUM,     /* target: char * (owned copy), must be one of `allowed` ("a|b|c") */
  OPT_ADDR,     /* target: char * (owned copy), HOST:PORT with port 1..65535 or unix:PATH */
  OPT_INT,      /* target: long long, within [min, max] */
  OPT_DOUBLE,   /* target: double, finite, within [min, max] */
  OPT_DURATION, /* target: int64_t milliseconds, within [min, max] ms */
  OPT_BOOL,     /* target: bool; a flag takes no value, env accepts true/false/1/0 */
  OPT_KV_LIST,  /* target: struct kv_list; repeatable "key=value" */
};

struct kv_list {
  struct kv *items; /* keys and values are owned copies */
  size_t n;
};

struct opt_def {
  const char *name; /* long flag without "--" */
  char short_name;  /* 0 when none */
  const char *env;  /* environment variable, NULL when none */
  enum opt_type type;
  const char *def;     /* default as text, NULL = unset */
  double min, max;     /* bounds for INT, DOUBLE, DURATION (ms) */
  const char *allowed; /* ENUM: "nvml|mock" */
  const char *metavar; /* shown in help: ADDR, FILE, DURATION ... */
  const char *help;
  size_t offset; /* offsetof(target struct, field) */
};

/* Applies defaults, then environment variables, then argv[start..argc). Positional arguments are
 * rejected. Returns 0; 1 when --help/-h was given (nothing else reported); or GS_EINVAL with err
 * naming the option (flag and env), the bad value and what is allowed. Call config_free after. */
int config_parse(const struct opt_def *defs, size_t n, int argc, char **argv, int start,
                 void *target, char *err, size_t errlen);
/* Prints "usage" then one line per option: flag, env, default, bounds, help. */
void config_help(FILE *f, const char *usage, const char *description, const struct opt_def *defs,
                 size_t n);
/* Logs the effective configuration: at INFO one line with the options that differ from their
 * default and how many do not; at DEBUG one key=value line per option. */
void config_log(const char *module, const struct opt_def *defs, size_t n, const void *target);
/* Frees owned strings and lists in target. */
void config_free(const struct opt_def *defs, size_t n, void *target);

#endif
