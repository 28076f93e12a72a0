/* libFuzzer target for `gpuscale lint`'s reader of Kubernetes YAML (ScaledObjects and their
 * triggers), from memory, and the trigger checks it feeds: unknown keys and the scaler's parser. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/lint_load.h"
#include "core/profile.h"
#include "core/trigger.h"
#include "core/trigger_keys.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct lint_file f;
  char err[512];
  (void)lint_load_mem((const char *)data, size, &f, err, sizeof err);
  struct profile_set ps = {0};
  if (profile_set_init(&ps)) {
    lint_file_free(&f);
    return 0;
  }
  for (size_t i = 0; i < f.nobj; i++)
    for (size_t j = 0; j < f.obj[i].ntrig; j++) {
      const struct lint_trigger *t = &f.obj[i].trig[j];
      char keys[256];
      size_t n = trigger_unknown_keys(t->md, t->nmd, keys, sizeof keys);
      if (n == 0 && keys[0])
        abort(); /* no unknown key, yet something listed */
      for (size_t k = 0; k < t->nmd; k++)
        if (!t->md[k].key || !t->md[k].value || !t->md_line[k])
          abort(); /* every pair has a key, a value and a line */
      struct trigger tr;
      if (trigger_parse_ref(t->md, t->nmd, &ps, f.obj[i].ns, &tr, err, sizeof err) == 0)
        trigger_free(&tr);
    }
  profile_set_free(&ps);
  lint_file_free(&f);
  return 0;
}
