/* The mock collector: plays a scenario (YAML file or the built-in default) as if it were NVML. */
#include <stdatomic.h>
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
  /* Scripted failures (fail:) counted by metric and code since open, across reloads. */
  _Atomic uint64_t errors[GF__COUNT][SCENARIO_FAIL__COUNT];
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
  double t = (double)(now - m->t0_ms) / 1000.0;
  int rc = scenario_fill(m->sc, i, t, out, err, errlen);
  /* health: lost or error reads nothing, so no call of it failed */
  if (rc == 0 || (rc == GS_EIO && m->sc->gpus[i].health == GPU_HEALTH_OK))
    for (int f = 0; f < GF__COUNT; f++) {
      enum scenario_fail_code code = scenario_failing(m->sc, i, (enum gpu_field)f, t);
      if (code != SCENARIO_FAIL_NONE)
        atomic_fetch_add_explicit(&m->errors[f][code], 1, memory_order_relaxed);
    }
  return rc;
}

/* Like NVML's counts, by call and code; the mock's "call" is the metric it fails. */
static size_t mock_errors(struct collector *c, struct collector_error_count *out, size_t cap) {
  struct mock *m = mock_of(c);
  size_t k = 0;
  for (int f = 0; f < GF__COUNT; f++)
    for (int code = 1; code < SCENARIO_FAIL__COUNT; code++) {
      uint64_t v = atomic_load_explicit(&m->errors[f][code], memory_order_relaxed);
      if (v == 0)
        continue;
      if (k < cap)
        out[k] =
            (struct collector_error_count){gpu_field_name((enum gpu_field)f),
                                           scenario_fail_name((enum scenario_fail_code)code), v};
      k++;
    }
  return k;
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
    .errors = mock_errors,
    .close = mock_close,
};
