/* The mock collector: plays a scenario (YAML file or the built-in default) as if it were NVML. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect/collector.h"
#include "collect/scenario.h"
#include "core/err.h"
#include "core/timeutil.h"

struct mock {
  struct collector base; /* first member: a struct collector * is a struct mock * */
  struct scenario *sc;
  char *path;    /* NULL: built-in default scenario */
  int64_t t0_ms; /* monotonic time of the last (re)load: pattern time 0 */
};

static struct mock *mock_of(struct collector *c) {
  return (struct mock *)c;
}

static void mock_close(struct collector *c) {
  struct mock *m = mock_of(c);
  if (!m)
    return;
  scenario_free(m->sc);
  free(m->path);
  free(m);
}

static int mock_open(const struct collector_config *cfg, struct collector **out, char *err,
                     size_t errlen) {
  struct mock *m = calloc(1, sizeof *m);
  if (!m) {
    snprintf(err, errlen, "mock: out of memory");
    return GS_ENOMEM;
  }
  m->base.ops = &collector_mock;
  m->base.caps = COLLECTOR_CAP_PCI | COLLECTOR_CAP_DRIVER | COLLECTOR_CAP_RELOAD;
  const char *path = cfg ? cfg->scenario_path : NULL;
  int rc;
  if (path) {
    size_t l = strlen(path);
    m->path = malloc(l + 1);
    if (!m->path) {
      free(m);
      snprintf(err, errlen, "mock: out of memory");
      return GS_ENOMEM;
    }
    memcpy(m->path, path, l + 1);
    rc = scenario_load(m->path, &m->sc, err, errlen);
  } else {
    rc = scenario_default(&m->sc, err, errlen);
  }
  if (rc) {
    mock_close(&m->base);
    return rc;
  }
  m->t0_ms = time_mono_ms();
  *out = &m->base;
  return 0;
}

static size_t mock_count(struct collector *c) {
  return mock_of(c)->sc->ngpus;
}

static const struct gpu_info *mock_info(struct collector *c, size_t i) {
  struct mock *m = mock_of(c);
  return i < m->sc->ngpus ? &m->sc->gpus[i].info : NULL;
}

static int mock_sample(struct collector *c, size_t i, struct gpu_sample *out, char *err,
                       size_t errlen) {
  struct mock *m = mock_of(c);
  memset(out, 0, sizeof *out);
  int64_t now = time_mono_ms();
  out->mono_ms = now;
  out->ts_ms = time_wall_ms();
  return scenario_fill(m->sc, i, (double)(now - m->t0_ms) / 1000.0, out, err, errlen);
}

static const char *mock_driver_version(struct collector *c) {
  return mock_of(c)->sc->driver_version;
}

static int mock_reload(struct collector *c, char *err, size_t errlen) {
  struct mock *m = mock_of(c);
  if (!m->path)
    return 0; /* the built-in scenario never changes */
  struct scenario *fresh = NULL;
  int rc = scenario_load(m->path, &fresh, err, errlen);
  if (rc)
    return rc; /* keep playing the old scenario */
  scenario_free(m->sc);
  m->sc = fresh;
  m->t0_ms = time_mono_ms();
  return 0;
}

const struct collector_ops collector_mock = {
    .name = "mock",
    .open = mock_open,
    .count = mock_count,
    .info = mock_info,
    .sample = mock_sample,
    .driver_version = mock_driver_version,
    .reload = mock_reload,
    .close = mock_close,
};
