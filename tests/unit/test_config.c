/* Unit tests for the option table engine: defaults, environment, flags, errors, help and free. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/config.h"
#include "core/err.h"

struct tcfg {
  char *listen;
  char *collector;
  long long max_gpus;
  double ratio;
  int64_t interval_ms;
  bool verbose;
  bool tls;
  struct kv_list md;
  char *name;
};

#define OFF(f) offsetof(struct tcfg, f)

static const struct opt_def defs[] = {
    {"listen", 'l', "GST_LISTEN|GST_OLD_LISTEN", OPT_ADDR, "0.0.0.0:6000", 0, 0, NULL, "ADDR",
     "gRPC listen", OFF(listen)},
    {"collector", 0, "GST_COLLECTOR", OPT_ENUM, "nvml", 0, 0, "nvml|mock", "NAME", "backend",
     OFF(collector)},
    {"max-gpus", 0, "GST_MAX_GPUS", OPT_INT, "8", 1, 256, NULL, "N", "GPU limit", OFF(max_gpus)},
    {"ratio", 0, "GST_RATIO", OPT_DOUBLE, "0.5", 0, 1, NULL, "X", "a fraction", OFF(ratio)},
    {"interval", 'i', "GST_INTERVAL", OPT_DURATION, "1s", 100, 60000, NULL, "DURATION",
     "sampling interval", OFF(interval_ms)},
    {"verbose", 'v', "GST_VERBOSE|GST_OLD_VERBOSE", OPT_BOOL, "false", 0, 0, NULL, NULL,
     "more logs", OFF(verbose)},
    {"tls", 0, NULL, OPT_BOOL, NULL, 0, 0, NULL, NULL, "serve TLS", OFF(tls)},
    {"metadata", 'm', NULL, OPT_KV_LIST, NULL, 0, 0, NULL, "KEY=VALUE", "trigger metadata",
     OFF(md)},
    {"name", 0, NULL, OPT_STRING, NULL, 0, 0, NULL, "NAME", "a name", OFF(name)},
};
#define NDEFS (sizeof defs / sizeof defs[0])

static const char *const envs[] = {"GST_LISTEN",     "GST_COLLECTOR",  "GST_MAX_GPUS",
                                   "GST_RATIO",      "GST_INTERVAL",   "GST_VERBOSE",
                                   "GST_OLD_LISTEN", "GST_OLD_VERBOSE"};

static void clear_env(void) {
  for (size_t i = 0; i < sizeof envs / sizeof envs[0]; i++)
    unsetenv(envs[i]);
}

/* Parses argv (NULL-terminated, without the program name) with env pairs "NAME=value". */
static int run(const char *const *args, const char *const *env, struct tcfg *c, char *err,
               size_t errlen) {
  clear_env();
  for (size_t i = 0; env && env[i]; i++) {
    char name[64];
    const char *eq = strchr(env[i], '=');
    snprintf(name, sizeof name, "%.*s", (int)(eq - env[i]), env[i]);
    setenv(name, eq + 1, 1);
  }
  char *argv[16];
  int argc = 0;
  argv[argc++] = (char *)"gpuscale-test";
  for (size_t i = 0; args && args[i]; i++)
    argv[argc++] = (char *)args[i];
  argv[argc] = NULL;
  memset(c, 0, sizeof *c);
  err[0] = '\0';
  int rc = config_parse(defs, NDEFS, argc, argv, 1, c, err, errlen);
  clear_env();
  return rc;
}

struct good_case {
  const char *label;
  const char *args[10]; /* one slot more than used: NULL-terminated */
  const char *env[5];
  const char *listen, *collector;
  long long max_gpus;
  double ratio;
  int64_t interval_ms;
  bool verbose, tls;
  const char *name;
};

static const struct good_case good_cases[] = {
    {"defaults", {NULL}, {NULL}, "0.0.0.0:6000", "nvml", 8, 0.5, 1000, false, false, NULL},
    {"env overrides defaults",
     {NULL},
     {"GST_MAX_GPUS=16", "GST_INTERVAL=250ms", "GST_COLLECTOR=mock", "GST_VERBOSE=1"},
     "0.0.0.0:6000",
     "mock",
     16,
     0.5,
     250,
     true,
     false,
     NULL},
    {"empty env is ignored",
     {NULL},
     {"GST_MAX_GPUS="},
     "0.0.0.0:6000",
     "nvml",
     8,
     0.5,
     1000,
     false,
     false,
     NULL},
    {"flag beats env (--flag=value)",
     {"--max-gpus=32", "--interval=2s"},
     {"GST_MAX_GPUS=16", "GST_INTERVAL=250ms"},
     "0.0.0.0:6000",
     "nvml",
     32,
     0.5,
     2000,
     false,
     false,
     NULL},
    {"flag beats env (--flag value)",
     {"--max-gpus", "64", "--collector", "nvml"},
     {"GST_MAX_GPUS=16", "GST_COLLECTOR=mock"},
     "0.0.0.0:6000",
     "nvml",
     64,
     0.5,
     1000,
     false,
     false,
     NULL},
    {"short flags with values",
     {"-l", "127.0.0.1:7000", "-i", "1m"},
     {NULL},
     "127.0.0.1:7000",
     "nvml",
     8,
     0.5,
     60000,
     false,
     false,
     NULL},
    {"unix and IPv6 addresses, the last flag wins",
     {"--listen=unix:/tmp/gs.sock", "--listen", "[::]:6001"},
     {NULL},
     "[::]:6001",
     "nvml",
     8,
     0.5,
     1000,
     false,
     false,
     NULL},
    {"bool flags without a value",
     {"--verbose", "--tls"},
     {NULL},
     "0.0.0.0:6000",
     "nvml",
     8,
     0.5,
     1000,
     true,
     true,
     NULL},
    {"short bool flag", {"-v"}, {NULL}, "0.0.0.0:6000", "nvml", 8, 0.5, 1000, true, false, NULL},
    {"bool flag =false beats env true",
     {"--verbose=false"},
     {"GST_VERBOSE=true"},
     "0.0.0.0:6000",
     "nvml",
     8,
     0.5,
     1000,
     false,
     false,
     NULL},
    {"bool env no",
     {NULL},
     {"GST_VERBOSE=no"},
     "0.0.0.0:6000",
     "nvml",
     8,
     0.5,
     1000,
     false,
     false,
     NULL},
    /* a second name, as dcgm-exporter's DCGM_EXPORTER_* variables for the agent's options */
    {"the alias variable sets the option; Go's \":PORT\" and bool spellings",
     {NULL},
     {"GST_OLD_LISTEN=:9400", "GST_OLD_VERBOSE=True"},
     "0.0.0.0:9400",
     "nvml",
     8,
     0.5,
     1000,
     true,
     false,
     NULL},
    {"our variable beats the alias, a flag beats both",
     {"--verbose=false"},
     {"GST_LISTEN=127.0.0.1:7001", "GST_OLD_LISTEN=127.0.0.1:7002", "GST_OLD_VERBOSE=true"},
     "127.0.0.1:7001",
     "nvml",
     8,
     0.5,
     1000,
     false,
     false,
     NULL},
    {"double and string, bounds inclusive",
     {"--ratio=1", "--name", "node-a", "--max-gpus=256", "--interval=100ms"},
     {NULL},
     "0.0.0.0:6000",
     "nvml",
     256,
     1,
     100,
     false,
     false,
     "node-a"},
    {"value that starts with a dash",
     {"--name", "-x"},
     {NULL},
     "0.0.0.0:6000",
     "nvml",
     8,
     0.5,
     1000,
     false,
     false,
     "-x"},
};

static void test_good_cases(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof good_cases / sizeof good_cases[0]; i++) {
    const struct good_case *g = &good_cases[i];
    struct tcfg c;
    char err[512];
    int rc = run(g->args, g->env, &c, err, sizeof err);
    if (rc != 0)
      print_error("case \"%s\": rc %d: %s\n", g->label, rc, err);
    assert_int_equal(rc, 0);
    if (c.max_gpus != g->max_gpus || c.interval_ms != g->interval_ms || c.verbose != g->verbose)
      print_error("case \"%s\": max_gpus %lld interval %lld verbose %d\n", g->label, c.max_gpus,
                  (long long)c.interval_ms, c.verbose);
    assert_string_equal(c.listen, g->listen);
    assert_string_equal(c.collector, g->collector);
    assert_int_equal(c.max_gpus, g->max_gpus);
    assert_true(c.ratio == g->ratio);
    assert_int_equal(c.interval_ms, g->interval_ms);
    assert_int_equal(c.verbose, g->verbose);
    assert_int_equal(c.tls, g->tls);
    if (g->name)
      assert_string_equal(c.name, g->name);
    else
      assert_null(c.name);
    assert_int_equal(c.md.n, 0);
    config_free(defs, NDEFS, &c);
  }
}

static void test_kv_list(void **state) {
  (void)state;
  static const char *const args[] = {"-m",
                                     "profile=vllm-inference",
                                     "--metadata",
                                     "gpuIndex=0,1",
                                     "--metadata=window=30s",
                                     "-m",
                                     "empty=",
                                     NULL};
  struct tcfg c;
  char err[512];
  assert_int_equal(run(args, NULL, &c, err, sizeof err), 0);
  static const struct kv want[] = {
      {"profile", "vllm-inference"}, {"gpuIndex", "0,1"}, {"window", "30s"}, {"empty", ""}};
  assert_int_equal(c.md.n, 4);
  for (size_t i = 0; i < 4; i++) {
    assert_string_equal(c.md.items[i].key, want[i].key);
    assert_string_equal(c.md.items[i].value, want[i].value);
  }
  config_free(defs, NDEFS, &c);
  assert_null(c.md.items);
  assert_int_equal(c.md.n, 0);
  assert_null(c.listen);
  assert_null(c.collector);
}

struct bad_case {
  const char *label;
  const char *args[6]; /* NULL-terminated */
  const char *env[2];
  const char *frags[4]; /* all must appear in the message */
};

static const struct bad_case bad_cases[] = {
    {"int below min", {"--max-gpus=0"}, {NULL}, {"--max-gpus (GST_MAX_GPUS)", "\"0\"", "[1, 256]"}},
    {"int above max",
     {"--max-gpus", "300"},
     {NULL},
     {"--max-gpus (GST_MAX_GPUS)", "\"300\"", "256"}},
    {"int not a number", {"--max-gpus=12x"}, {NULL}, {"--max-gpus", "\"12x\"", "integer"}},
    {"int empty", {"--max-gpus="}, {NULL}, {"--max-gpus", "\"\"", "integer"}},
    {"int from env",
     {NULL},
     {"GST_MAX_GPUS=999"},
     {"--max-gpus (GST_MAX_GPUS)", "\"999\"", "environment GST_MAX_GPUS"}},
    {"double above max", {"--ratio=1.5"}, {NULL}, {"--ratio (GST_RATIO)", "\"1.5\"", "[0, 1]"}},
    {"a bad value from the alias names the alias",
     {NULL},
     {"GST_OLD_LISTEN=nowhere"},
     {"--listen (GST_LISTEN)", "\"nowhere\"", "environment GST_OLD_LISTEN"}},
    {"double nan", {"--ratio=nan"}, {NULL}, {"--ratio", "\"nan\"", "number"}},
    {"enum not allowed",
     {"--collector=fake"},
     {NULL},
     {"--collector (GST_COLLECTOR)", "\"fake\"", "nvml|mock"}},
    {"enum from env", {NULL}, {"GST_COLLECTOR=NVML"}, {"GST_COLLECTOR", "\"NVML\"", "nvml|mock"}},
    {"duration without unit",
     {"--interval=5"},
     {NULL},
     {"--interval (GST_INTERVAL)", "\"5\"", "500ms"}},
    {"duration below min", {"--interval", "10ms"}, {NULL}, {"--interval", "\"10ms\"", "100ms"}},
    {"duration above max", {"-i", "2h"}, {NULL}, {"--interval", "\"2h\"", "1m"}},
    {"duration garbage", {NULL}, {"GST_INTERVAL=soon"}, {"GST_INTERVAL", "\"soon\"", "duration"}},
    {"bool env garbage",
     {NULL},
     {"GST_VERBOSE=maybe"},
     {"GST_VERBOSE", "\"maybe\"", "true, false"}},
    {"bool flag garbage", {"--verbose=yesplease"}, {NULL}, {"--verbose", "\"yesplease\"", "true"}},
    {"address without port",
     {"--listen=localhost"},
     {NULL},
     {"--listen (GST_LISTEN)", "\"localhost\"", "HOST:PORT"}},
    {"address port 0", {"--listen=host:0"}, {NULL}, {"--listen", "\"host:0\"", "1..65535"}},
    {"address port too big", {"--listen", "host:70000"}, {NULL}, {"\"host:70000\"", "1..65535"}},
    {"address empty unix", {"--listen=unix:"}, {NULL}, {"\"unix:\"", "unix:PATH"}},
    {"kv without =", {"-m", "novalue"}, {NULL}, {"--metadata", "\"novalue\"", "key=value"}},
    {"kv with empty key", {"--metadata==v"}, {NULL}, {"--metadata", "\"=v\"", "key=value"}},
    {"unknown long option", {"--bogus=1"}, {NULL}, {"unknown option", "--bogus"}},
    {"unknown short option", {"-x"}, {NULL}, {"unknown option", "\"-x\""}},
    {"prefix is not a match", {"--max=3"}, {NULL}, {"unknown option", "--max"}},
    {"positional argument", {"extra"}, {NULL}, {"unexpected argument", "\"extra\""}},
    {"missing value", {"--max-gpus"}, {NULL}, {"--max-gpus", "needs a value", "N"}},
};

static void test_bad_cases(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
    const struct bad_case *b = &bad_cases[i];
    struct tcfg c;
    char err[512];
    int rc = run(b->args, b->env, &c, err, sizeof err);
    bool ok = rc == GS_EINVAL;
    for (size_t k = 0; k < 4 && b->frags[k]; k++)
      ok = ok && strstr(err, b->frags[k]);
    if (!ok)
      print_error("case \"%s\": rc %d, err \"%s\"\n", b->label, rc, err);
    assert_int_equal(rc, GS_EINVAL);
    for (size_t k = 0; k < 4 && b->frags[k]; k++)
      assert_non_null(strstr(err, b->frags[k]));
    config_free(defs, NDEFS, &c); /* also after an error: nothing leaks */
  }
}

static void test_help(void **state) {
  (void)state;
  static const char *const h1[] = {"--help", NULL};
  static const char *const h2[] = {"--verbose", "-h", "--max-gpus=0", NULL};
  struct tcfg c;
  char err[256];
  assert_int_equal(run(h1, NULL, &c, err, sizeof err), 1);
  config_free(defs, NDEFS, &c);
  assert_int_equal(run(h2, NULL, &c, err, sizeof err), 1);
  config_free(defs, NDEFS, &c);

  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  config_help(f, "gpuscale-test [options]", "A test.", defs, NDEFS);
  fclose(f);
  static const char *const frags[] = {"Usage: gpuscale-test [options]",
                                      "-l, --listen ADDR",
                                      "--max-gpus N",
                                      "default 8",
                                      "env GST_MAX_GPUS",
                                      "one of nvml|mock",
                                      "-h, --help"};
  for (size_t i = 0; i < sizeof frags / sizeof frags[0]; i++) {
    if (!strstr(text, frags[i]))
      print_error("help lacks \"%s\":\n%s\n", frags[i], text);
    assert_non_null(strstr(text, frags[i]));
  }
  free(text);
}

/* Parsing twice into the same target replaces strings without leaking (valgrind checks). */
static void test_free_and_reparse(void **state) {
  (void)state;
  static const char *const args[] = {"--name", "a", "--name", "b", "-m", "k=v", NULL};
  struct tcfg c;
  char err[256];
  assert_int_equal(run(args, NULL, &c, err, sizeof err), 0);
  assert_string_equal(c.name, "b");
  config_free(defs, NDEFS, &c);
  assert_null(c.name);
  config_free(defs, NDEFS, &c); /* twice is harmless */
  struct tcfg zero;
  memset(&zero, 0, sizeof zero);
  config_free(defs, NDEFS, &zero);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_good_cases),       cmocka_unit_test(test_kv_list),
      cmocka_unit_test(test_bad_cases),        cmocka_unit_test(test_help),
      cmocka_unit_test(test_free_and_reparse),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
