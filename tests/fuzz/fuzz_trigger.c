/* libFuzzer target for trigger_parse: the input is key=value lines turned into a struct kv array.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/profile.h"
#include "core/trigger.h"

#define FUZZ_MAX_INPUT 8192
#define FUZZ_MAX_KV 32

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
static int allow_some(const char *url, char *err, size_t errlen);
static void parse_once(const struct kv *md, size_t n, int (*check)(const char *, char *, size_t));

static struct profile_set profiles;
static int profiles_ready;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!profiles_ready) {
    if (profile_set_init(&profiles) != 0)
      return 0;
    profiles_ready = 1;
  }
  if (size > FUZZ_MAX_INPUT)
    size = FUZZ_MAX_INPUT;
  char *text = malloc(size + 1);
  if (!text)
    return 0;
  memcpy(text, data, size);
  text[size] = '\0';

  /* Lines "key=value"; a line without '=' is a key whose value is NULL (KEDA never sends that,
   * but the parser must cope). Embedded NULs simply end a string early. */
  struct kv md[FUZZ_MAX_KV];
  size_t n = 0;
  char *p = text;
  while (p < text + size && n < FUZZ_MAX_KV) {
    char *nl = memchr(p, '\n', (size_t)(text + size - p));
    if (nl)
      *nl = '\0';
    char *eq = strchr(p, '=');
    if (eq)
      *eq = '\0';
    md[n].key = p;
    md[n].value = eq ? eq + 1 : NULL;
    n++;
    if (!nl)
      break;
    p = nl + 1;
  }

  /* Twice: without URLs (the default) and with an operator's check that allows some. */
  for (int pass = 0; pass < 2; pass++)
    parse_once(md, n, pass ? allow_some : NULL);
  free(text);
  return 0;
}

/* The operator's --allow-engine-endpoints, faked: any URL but loopback-looking ones. */
static int allow_some(const char *url, char *err, size_t errlen) {
  if (strstr(url, "127.")) {
    snprintf(err, errlen, "loopback");
    return GS_EINVAL;
  }
  return 0;
}

static void parse_once(const struct kv *md, size_t n, int (*check)(const char *, char *, size_t)) {
  struct trigger t;
  char err[1024];
  err[0] = '\0';
  profiles.endpoint_check = check;
  int rc = trigger_parse(md, n, &profiles, &t, err, sizeof err);
  /* The contract, checked on every input: a success is a usable trigger, a failure explains. An
   * engine trigger names a signal, picks no GPU, and has a URL only when the check allowed it. */
  if (rc == 0 && t.engine &&
      (t.esignal < 0 || t.esignal >= ES__COUNT || t.n_indices || t.window_ms ||
       (t.endpoint[0] && (!check || !t.endpoint_key || strstr(t.endpoint, "127.")))))
    abort();
  if (rc == 0 && !t.engine && t.endpoint[0])
    abort();
  if (rc == 0) {
    if (!(t.target > 0) || !isfinite(t.target) || !(t.activation >= 0) || !isfinite(t.activation) ||
        t.agg >= AGG__COUNT || t.metric >= GF__COUNT || t.n_indices > TRIGGER_MAX_INDICES ||
        t.window_ms < 0 || !t.metric_name[0] || strlen(t.metric_name) >= sizeof t.metric_name)
      abort();
    for (size_t i = 0; i < t.n_indices; i++)
      if (t.indices[i] < 0)
        abort();
    trigger_free(&t); /* compiled pods/nodes/gpuModel regexes */
  } else if (rc != GS_EINVAL || !err[0] || strlen(err) >= sizeof err) {
    abort();
  }
}
