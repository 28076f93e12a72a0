/* libFuzzer target for the simulator's inputs: the workload model, the ScaledObject (or
 * HTTPScaledObject, with scalingModifiers; a batching model is stepped), the CSV trace, the
 * per-request trace, the Prometheus query_range trace and a
 * scalingModifiers formula, each parsed from the same bytes (no file access). */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "sim/formula.h"
#include "sim/model.h"
#include "sim/scaledobject.h"
#include "sim/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[1024];
  const char *text = (const char *)data;
  struct sim_model m;
  if (sim_model_parse(text, size, "fuzz.yaml", &m, err, sizeof err) == 0) {
    if (!(m.capacity > 0) || m.nsig > SIM_MAX_SIGNALS)
      abort();
    for (size_t i = 0; i < m.nsig; i++)
      for (double rho = 0; m.sig[i].kind != SIM_SIG_OBSERVED && rho < 3; rho += 0.25)
        if (isnan(sim_signal_at(&m.sig[i], rho, rho * 10)))
          abort();        /* a signal of load never reads NaN (observed ones come from requests) */
    if (m.batching.set) { /* the batching model: finite readings at any rate, queue bounded */
      struct sim_batch st;
      struct sim_batch_step o;
      memset(&st, 0, sizeof st);
      for (int t = 0; t < 50; t++) {
        double a = (double)(t % 7) * m.capacity;
        sim_batch_step(&m.batching, &st, 1 + t % 3, m.queue_per_pod, a, a * 100, a * 10, &o);
        if (!isfinite(o.running) || !isfinite(o.waiting) || !isfinite(o.kv_pct) ||
            !isfinite(o.busy) || o.waiting > m.queue_per_pod + 1e-6 || st.run < 0)
          abort();
      }
    }
  }
  struct sim_scaledobject so;
  if (sim_so_parse(text, size, "fuzz.yaml", &so, err, sizeof err) == 0) {
    if (so.ntrig == 0 || so.ntrig > SIM_MAX_TRIGGERS || so.keda.max_replicas < so.keda.min_replicas)
      abort();
    if (so.keda.has_idle && so.keda.idle_replicas >= so.keda.min_replicas)
      abort(); /* idleReplicaCount is below minReplicaCount */
    if (so.mods.set && (!(so.mods.target > 0) || so.mods.nvars > so.ntrig))
      abort();
    sim_so_free(&so);
  }
  struct sim_trace tr;
  /* a bounded duration, so that a point at 31 days does not allocate a month of seconds */
  if (sim_trace_csv(text, size, "fuzz.csv", 3600, &tr, err, sizeof err) == 0) {
    for (size_t i = 0; i < tr.n; i++)
      if (!(tr.rate[i] >= 0))
        abort();
    sim_trace_free(&tr);
  }
  if (sim_trace_requests(text, size, "fuzz.csv", 3600, &tr, err, sizeof err) == 0) {
    for (size_t i = 0; i < tr.n; i++)
      if (!(tr.rate[i] >= 0) || !(tr.in_tok[i] >= 0) || !(tr.out_tok[i] >= 0))
        abort();
    sim_trace_free(&tr);
  }
  if (sim_trace_promjson(text, size, "fuzz.json", 3600, &tr, err, sizeof err) == 0) {
    for (size_t i = 0; i < tr.n; i++)
      if (!(tr.rate[i] >= 0))
        abort();
    sim_trace_free(&tr);
  }
  /* the bytes as a formula over three names (NUL-terminated copy: the parser reads a string) */
  if (size <= SIM_FORMULA_MAX_LEN) {
    char f[SIM_FORMULA_MAX_LEN + 1];
    memcpy(f, data, size);
    f[size] = '\0';
    static const char *const names[] = {"a", "b", "queue"};
    static const double vals[] = {3, -2, 0};
    struct sim_formula sf;
    double v;
    if (sim_formula_parse(f, names, 3, &sf, err, sizeof err) == 0) {
      int rc = sim_formula_eval(&sf, vals, &v);
      if (rc != 0 && rc != GS_EINVAL)
        abort();
      if (rc == 0 && !isfinite(v))
        abort(); /* a result is finite, or an error */
    }
  }
  return 0;
}
