/* libFuzzer target for trigger_parse: the input is key=value lines turned into a struct kv array.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/profile.h"
#include "core/trigger.h"

#define FUZZ_MAX_INPUT 8192
#define FUZZ_MAX_KV 32

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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

  struct trigger t;
  char err[512];
  err[0] = '\0';
  int rc = trigger_parse(md, n, &profiles, &t, err, sizeof err);
  /* The contract, checked on every input: a success is a usable trigger, a failure explains. */
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
  free(text);
  return 0;
}
