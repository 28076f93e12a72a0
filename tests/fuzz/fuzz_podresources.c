/* Fuzzes the kubelet ListPodResourcesResponse decoder and the device-id parsers behind it
 * (device-plugin ids, DRA device and CDI names). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/devid.h"
#include "rpc/podresources.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct podres_list l;
  if (podres_decode(data, size, &l) == 0) {
    for (size_t p = 0; p < l.n_pods; p++)
      for (size_t c = 0; c < l.pods[p].n_containers; c++)
        for (size_t d = 0; d < l.pods[p].containers[c].n_dra; d++) {
          const struct podres_dra *dr = &l.pods[p].containers[c].dra[d];
          struct devid id;
          const char *err = NULL;
          devid_parse_dra(dr->driver, dr->device, dr->cdi, dr->n_cdi, &id, &err);
        }
    for (size_t p = 0; p < l.n_pods; p++)
      for (size_t c = 0; c < l.pods[p].n_containers; c++)
        for (size_t d = 0; d < l.pods[p].containers[c].n_devices; d++) {
          const struct podres_devices *dv = &l.pods[p].containers[c].devices[d];
          for (size_t i = 0; i < dv->n_ids; i++) {
            struct devid id;
            const char *err = NULL;
            devid_parse(dv->ids[i], &id, &err);
          }
        }
    podres_list_free(&l);
  }
  /* The same bytes as one device id string. */
  char s[256];
  size_t n = size < sizeof s - 1 ? size : sizeof s - 1;
  memcpy(s, data, n);
  s[n] = '\0';
  struct devid id;
  const char *err = NULL;
  devid_parse(s, &id, &err);
  /* ... and as a DRA device name and CDI name */
  char *cdi[1] = {s};
  devid_parse_dra("gpu.nvidia.com", s, cdi, 1, &id, &err);
  devid_parse_dra("", "", cdi, 1, &id, &err);
  return 0;
}
