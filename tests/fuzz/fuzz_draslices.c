/* Fuzzes the DRA ResourceSliceList parser (Kubernetes JSON) and the lookup behind it. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/draslices.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct draslices s;
  const char *err = NULL;
  if (draslices_parse((const char *)data, size, "gpu.nvidia.com", &s, &err) == 0) {
    for (size_t i = 0; i < s.n; i++) {
      /* every kept device is found again by its own pool and name, with a NUL-ended uuid */
      const char *u = draslices_uuid(&s, s.v[i].pool, s.v[i].device);
      if (!u || !memchr(s.v[i].uuid, '\0', sizeof s.v[i].uuid))
        abort();
    }
    draslices_free(&s);
  } else if (s.n != 0 || s.v != NULL) {
    abort();
  }
  return 0;
}
