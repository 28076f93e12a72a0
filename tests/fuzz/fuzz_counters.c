/* libFuzzer target for counters_parse (a dcgm-exporter counters CSV given to --collectors). A
 * success must select only DCGM series with a gauge or counter type and a bounded report of the
 * unserved names, and /metrics must render with it, every selected family with the file's HELP. A
 * failure must say what was wrong, prefixed with the file's name. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/err.h"
#include "http/counters.h"
#include "http/exposition.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_render(const struct counters *c) {
  struct gpu_snapshot g;
  memset(&g, 0, sizeof g);
  snprintf(g.info.uuid, sizeof g.info.uuid, "GPU-fuzz");
  snprintf(g.info.name, sizeof g.info.name, "NVIDIA H100 80GB HBM3");
  g.info.parent_index = g.info.gi_id = g.info.minor = -1;
  g.has_sample = true;
  for (int f = 0; f < GF__COUNT; f++)
    sample_set(&g.latest, (enum gpu_field)f, 1);
  struct expo_input in = {.gpus = &g,
                          .ngpus = 1,
                          .hostname = "n",
                          .driver_version = "1",
                          .stale_ms = 1000,
                          .attribution = -1,
                          .counters = c};
  struct buf b;
  buf_init(&b, 1u << 22);
  if (expo_render(&b, &in) != 0)
    abort();
  for (size_t k = 0; k < expo_family_count(); k++) {
    if (!counters_on(c, k))
      continue;
    char head[512];
    snprintf(head, sizeof head, "# TYPE %s ", expo_family_name(k));
    if (!strstr(b.data, head))
      abort();
  }
  /* the driver label on the sample lines (a HELP text may say anything) */
  bool label = false;
  for (const char *p = b.data; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
    const char *e = strchr(p, '\n');
    const char *hit = strstr(p, ",DCGM_FI_DRIVER_VERSION=\"");
    if (*p != '#' && hit && (!e || hit < e))
      label = true;
  }
  if (label != c->driver_version)
    abort();
  buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct counters *c = malloc(sizeof *c);
  if (!c)
    return 0;
  char err[512] = "";
  int rc = counters_parse((const char *)data, size, "f.csv", c, err, sizeof err);
  if (rc == 0) {
    if (c->n_unserved > c->n_records || c->n_records == 0 || c->n_records > COUNTERS_MAX_RECORDS)
      abort();
    if (memchr(c->unserved, '\0', sizeof c->unserved) == NULL)
      abort();
    for (size_t k = 0; k < expo_family_count(); k++) {
      if (!((c->on >> k) & 1))
        continue;
      if (!expo_family_selectable(k))
        abort();
      if (strcmp(c->type[k], "gauge") != 0 && strcmp(c->type[k], "counter") != 0)
        abort();
    }
    check_render(c);
  } else {
    if (rc != GS_EPARSE && rc != GS_ETOOBIG)
      abort();
    if (strncmp(err, "f.csv", 5) != 0)
      abort();
  }
  free(c);
  return 0;
}
