/* Fuzzes the gateway's v1 NodeList parser (GPU nodes by capacity or selector, continue tokens). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "gateway/gpunodes.h"
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *s = (const char *)data, *err = NULL;
  struct gpunodes_match m;
  char e[256];
  if (gpunodes_match_parse(GPUNODES_DEFAULT_RESOURCES, &m, e, sizeof e) != 0)
    abort();
  for (int sel = 0; sel < 2; sel++) {
    m.by_selector = sel;
    struct gpunodes_page p;
    if (gpunodes_parse(s, size, &m, &p, &err) == 0)
      for (size_t i = 0; i < p.n; i++)
        if (strlen(p.items[i].name) == 0 || (p.items[i].gpu && !p.items[i].why[0]))
          abort(); /* a parsed node has a name, and a GPU node says why */
    gpunodes_page_free(&p);
  }
  gpunodes_match_free(&m);
  return 0;
}
