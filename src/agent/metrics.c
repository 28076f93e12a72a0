/* /metrics: snapshots the history, joins pods from the attribution table, renders the exposition
 * and gzips it when the client accepts gzip. A scrape never reaches the collector. */
#include "agent/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/sampler.h"
#include "agent/scrapeflight.h"
#include "core/err.h"
#include "core/log.h"
#include "core/timeutil.h"
#include "http/counters.h"
#include "http/exposition.h"
#include "http/gzip.h"

/* Sampler counters; a NULL sampler (bench, tests) shows none. */
static bool read_collect(const struct agent_api *api, struct expo_collect *c) {
  struct sampler *s = api->sampler;
  if (!s)
    return false;
  c->passes = atomic_load(&s->passes);
  c->reads = atomic_load(&s->reads);
  c->read_errors = atomic_load(&s->read_errors);
  c->lost = atomic_load(&s->lost);
  c->reloads_ok = atomic_load(&s->reloads_ok);
  c->reloads_failed = atomic_load(&s->reloads_failed);
  return true;
}

#define METRICS_XID_CODES 64 /* distinct XID codes written per GPU and window */

/* DCGM_EXP_XID_ERRORS_COUNT: each device's XID events in the window, from the collector's event
 * ring (memory only, no NVML call). NULL when the series is off or the collector has no events. */
static struct expo_xid_window *read_xid(const struct metrics_ctx *m,
                                        const struct gpu_snapshot *snap, size_t n,
                                        struct collector_xid_count **store) {
  const struct sampler *s = m->api->sampler;
  *store = NULL;
  if (!m->counters || !m->counters->exp_xid || !s || !s->col || !s->col->ops->xid_counts || !n)
    return NULL;
  struct expo_xid_window *w = calloc(n, sizeof *w);
  *store = calloc(n * METRICS_XID_CODES, sizeof **store);
  if (!w || !*store) {
    free(w);
    free(*store);
    *store = NULL;
    return NULL;
  }
  int64_t since = time_mono_ms() - m->xid_window_ms;
  size_t ndev = s->col->ops->count(s->col);
  for (size_t i = 0; i < n; i++) {
    struct collector_xid_count *c = *store + i * METRICS_XID_CODES;
    size_t k = 0, dev = (size_t)snap[i].info.index;
    if (snap[i].info.index < 0 || dev >= ndev ||
        s->col->ops->xid_counts(s->col, dev, since, c, METRICS_XID_CODES, &k) != 0 ||
        k > METRICS_XID_CODES)
      continue; /* not watched, or more than the ring or this array hold: no line */
    w[i] = (struct expo_xid_window){true, k, c};
  }
  return w;
}

/* DCGM_EXP_CLOCK_EVENTS_COUNT: each device's clock-event samples in the window, from the
 * collector's rings (memory only, no NVML call). NULL when the series is off or the collector
 * does not sample them. */
static struct expo_clock_window *read_clock(const struct metrics_ctx *m,
                                            const struct gpu_snapshot *snap, size_t n) {
  const struct sampler *s = m->api->sampler;
  if (!m->counters || !m->counters->exp_clock || !s || !s->col || !s->col->ops->clock_events || !n)
    return NULL;
  struct expo_clock_window *w = calloc(n, sizeof *w);
  if (!w)
    return NULL;
  int64_t since = time_mono_ms() - m->clock_window_ms;
  size_t ndev = s->col->ops->count(s->col);
  for (size_t i = 0; i < n; i++) {
    size_t dev = (size_t)snap[i].info.index;
    if (snap[i].info.index >= 0 && dev < ndev)
      w[i].known = s->col->ops->clock_events(s->col, dev, since, &w[i].ev) == 0;
  }
  return w;
}

int metrics_render(const struct metrics_ctx *m, struct buf *out) {
  const struct agent_api *api = m->api;
  /* Room for a few devices more than now, in case a reload grows the list meanwhile. */
  size_t cap = history_count(api->hist) + 4, n = 0;
  struct gpu_snapshot *snap = malloc(cap * sizeof *snap);
  struct gpu_pods *pods = malloc(cap * sizeof *pods);
  struct stats_snapshot *rpc = m->stats ? malloc(sizeof *rpc) : NULL;
  /* --kubernetes-enable-dra / -pod-uid, --shared-gpu-series per-pod: per GPU, its holders' pod
   * UIDs, DRA claim devices and own processes' values */
  bool want_k8s = (m->dra_labels || m->pod_uid || m->per_pod_series) && m->attrib;
  struct attrib_k8s **k8s = want_k8s ? calloc(cap, sizeof *k8s) : NULL;
  int rc = GS_ENOMEM;
  if (!snap || !pods || (m->stats && !rpc) || (want_k8s && !k8s))
    goto out;
  history_snapshot(api->hist, snap, cap, &n);
  if (n > cap)
    n = cap;

  int attribution = -1;
  if (m->attrib) {
    attribution = attrib_available(m->attrib) ? 1 : 0;
    for (size_t i = 0; i < n; i++) {
      bool held =
          attribution && (k8s ? attrib_lookup_k8s(m->attrib, snap[i].info.uuid, &pods[i], &k8s[i])
                              : attrib_lookup(m->attrib, snap[i].info.uuid, &pods[i]));
      if (!held) {
        pods[i].n = 0;
        pods[i].total = 0;
        pods[i].shared = false;
      }
    }
  }
  if (rpc)
    stats_snapshot(m->stats, rpc);
  struct expo_collect collect;
  bool have_collect = read_collect(api, &collect);
  struct collector_xid_count *xid_store;
  struct expo_xid_window *xid = read_xid(m, snap, n, &xid_store);
  struct expo_clock_window *clock = read_clock(m, snap, n);

  struct expo_input in = {
      .gpus = snap,
      .ngpus = n,
      .pods = m->attrib ? pods : NULL,
      .hostname = m->hostname_label ? api->node_name : NULL,
      .driver_version = api->driver_version,
      .now_mono_ms = time_mono_ms(),
      .stale_ms = 3 * api->interval_ms,
      .collect = have_collect ? &collect : NULL,
      .attribution = attribution,
      .shared_series = m->per_pod_series ? EXPO_SHARED_PER_POD : EXPO_SHARED_ONCE,
      .rpc = rpc,
      .version = GPUSCALE_VERSION,
      .counters = m->counters,
      .names = m->names,
      .hostname_label = m->host_label_name,
      .amd = api->collector_name && strcmp(api->collector_name, "rocm") == 0,
      .k8s = (const struct attrib_k8s *const *)k8s,
      .dra_labels = m->dra_labels,
      .pod_uid = m->pod_uid,
      .xid = xid,
      .xid_window_ms = m->xid_window_ms,
      .clock = clock,
      .clock_window_ms = m->clock_window_ms,
  };
  rc = expo_render(out, &in);
  free(clock);
  free(xid);
  free(xid_store);
  if (rc == 0)
    rc = sampler_render_errors(api->sampler, out); /* gpuscale_nvml_errors_total */
out:
  for (size_t i = 0; k8s && i < n; i++)
    free(k8s[i]);
  free(k8s);
  free(snap);
  free(pods);
  free(rpc);
  return rc;
}

static int render_cb(void *ud, struct buf *body) {
  return metrics_render(ud, body);
}

void metrics_handle(void *ud, const struct http_request *req, struct http_response *resp) {
  const struct metrics_ctx *m = ud;
  int rc;
  if (m->flight) {
    rc = scrape_flight_serve(m->flight, render_cb, (void *)m, req->accepts_gzip, &resp->body, NULL);
  } else if (req->accepts_gzip) {
    struct buf plain;
    buf_init(&plain, HTTP_BODY_MAX);
    rc = metrics_render(m, &plain);
    if (!rc)
      rc = gzip_compress(plain.data ? plain.data : "", plain.len, &resp->body);
    buf_free(&plain);
  } else {
    rc = metrics_render(m, &resp->body);
  }
  if (rc) {
    LOG_ERROR("metrics", "cannot render /metrics: %s", gs_strerror(rc));
    buf_reset(&resp->body);
    resp->status = 500;
    buf_printf(&resp->body, "cannot render metrics: %s\n", gs_strerror(rc));
    return;
  }
  resp->content_type = EXPO_CONTENT_TYPE;
  if (req->accepts_gzip)
    resp->content_encoding = "gzip";
}

/* --- bench support --- */

struct metrics_mock {
  bool full;
  struct counters *old_set; /* !full: the series /metrics wrote before issue 11 */
  struct history *hist;
  struct attrib *attrib;
  struct stats *stats;
  struct agent_api api;
  struct metrics_ctx ctx;
  struct buf plain;
};

static void mock_pod(struct pod_ref *p, size_t gpu, size_t k) {
  snprintf(p->ns, sizeof p->ns, "inference");
  snprintf(p->pod, sizeof p->pod, "vllm-%zu-%zu", gpu, k);
  snprintf(p->container, sizeof p->container, "server");
}

/* Every field of issue 11, as an H100 with GPM reports them. */
static void mock_full_fields(struct gpu_sample *s, size_t i) {
  static const struct {
    enum gpu_field f;
    double base, step;
  } v[] = {
      {GF_SM_CLOCK_MHZ, 1755, 15},
      {GF_MEM_CLOCK_MHZ, 2619, 0},
      {GF_MEM_TEMP_C, 60, 1},
      {GF_ENC_UTIL, 0, 0},
      {GF_DEC_UTIL, 3, 1},
      {GF_PCIE_REPLAY, 0, 1},
      {GF_XID_LAST, 0, 0},
      {GF_MEM_RESERVED_MIB, 527, 0},
      {GF_NVLINK_BW_TOTAL, 1e12, 7e9},
      {GF_ROWS_REMAP_CORR, 0, 1},
      {GF_ROWS_REMAP_UNCORR, 0, 0},
      {GF_ROW_REMAP_FAILURE, 0, 0},
      {GF_GR_ENGINE_ACTIVE, 40.5, 0.7},
      {GF_SM_ACTIVE, 35.25, 0.6},
      {GF_SM_OCCUPANCY, 20.125, 0.3},
      {GF_TENSOR_ACTIVE, 15.5, 0.5},
      {GF_DRAM_ACTIVE, 30.75, 0.4},
      {GF_PROF_PCIE_TX_BPS, 2.1e8, 1.3e6},
      {GF_PROF_PCIE_RX_BPS, 1.1e8, 7e5},
      {GF_PCIE_TX_KBPS, 205000, 1300},
      {GF_PCIE_RX_KBPS, 107000, 700},
      {GF_NVLINK_TX_MBPS, 15000.5, 90},
      {GF_NVLINK_RX_MBPS, 14500.25, 85},
  };
  for (size_t k = 0; k < sizeof v / sizeof v[0]; k++)
    sample_set(s, v[k].f, v[k].base + v[k].step * (double)(i % 32));
}

/* The 7 DCGM series of the old set, and its driver label, as a dcgm-exporter counters file. */
static const char old_set_csv[] =
    "DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).\n"
    "DCGM_FI_DEV_MEM_COPY_UTIL, gauge, Memory utilization (in %).\n"
    "DCGM_FI_DEV_FB_USED, gauge, Framebuffer memory used (in MiB).\n"
    "DCGM_FI_DEV_FB_FREE, gauge, Framebuffer memory free (in MiB).\n"
    "DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\n"
    "DCGM_FI_DEV_POWER_USAGE, gauge, Power draw (in W).\n"
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, counter, Total energy consumption since boot (in mJ).\n"
    "DCGM_FI_DRIVER_VERSION, label, Driver Version\n";

static int mock_fill(struct metrics_mock *mm, size_t ngpus) {
  struct gpu_info *infos = calloc(ngpus ? ngpus : 1, sizeof *infos);
  struct attrib_entry *ents = calloc(ngpus ? ngpus : 1, sizeof *ents);
  size_t nents = 0;
  int rc = GS_ENOMEM;
  if (!infos || !ents)
    goto out;
  for (size_t i = 0; i < ngpus; i++) {
    struct gpu_info *g = &infos[i];
    g->index = (int)i;
    snprintf(g->uuid, sizeof g->uuid, "GPU-%08zx-1111-4222-8333-%012zx", i, i * 7919);
    snprintf(g->name, sizeof g->name, mm->full ? "NVIDIA H100 80GB HBM3" : "NVIDIA A100-SXM4-80GB");
    snprintf(g->pci_bus_id, sizeof g->pci_bus_id, "00000000:%02zX:00.0", (i + 0x18) & 0xff);
    g->minor = (int)i;
    g->parent_index = -1;
    g->gi_id = -1;
  }
  if ((rc = history_set_devices(mm->hist, infos, ngpus)) != 0)
    goto out;
  for (size_t i = 0; i < ngpus; i++) {
    struct gpu_sample s;
    memset(&s, 0, sizeof s);
    s.ts_ms = time_wall_ms();
    s.mono_ms = time_mono_ms();
    sample_set(&s, GF_GPU_UTIL, (double)(i * 13 % 101));
    sample_set(&s, GF_MEM_UTIL, (double)(i * 7 % 101));
    sample_set(&s, GF_MEM_TOTAL_MIB, 81559);
    sample_set(&s, GF_MEM_USED_MIB, (double)(i * 997 % 81559));
    sample_set(&s, GF_MEM_FREE_MIB, 81559 - s.v[GF_MEM_USED_MIB]);
    sample_set(&s, GF_TEMP_C, 30 + (double)(i % 50));
    sample_set(&s, GF_POWER_W, 70.125 + (double)i);
    sample_set(&s, GF_ENERGY_MJ, 1e9 + (double)i * 12345);
    if (mm->full)
      mock_full_fields(&s, i);
    sample_derive(&s);
    history_push(mm->hist, i, &s);
    if (i % 2)
      continue;
    struct attrib_entry *e = &ents[nents++];
    snprintf(e->uuid, sizeof e->uuid, "%s", infos[i].uuid);
    e->pods.n = e->pods.total = i % 4 == 0 ? 2 : 1;
    e->pods.shared = e->pods.n > 1;
    for (size_t k = 0; k < e->pods.n; k++)
      mock_pod(&e->pods.pods[k], i, k);
  }
  rc = attrib_replace(mm->attrib, ents, nents);
  static const char *const methods[] = {"/externalscaler.ExternalScaler/GetMetrics",
                                        "/externalscaler.ExternalScaler/IsActive",
                                        "/grpc.health.v1.Health/Check"};
  for (size_t k = 0; k < 300; k++)
    stats_observe(mm->stats, methods[k % 3], k % 17 == 0 ? 14 : 0, 0.0002 * (double)(k % 50));
out:
  free(infos);
  free(ents);
  return rc;
}

struct metrics_mock *metrics_mock_new(size_t ngpus) {
  return metrics_mock_new_set(ngpus, true);
}

struct metrics_mock *metrics_mock_new_set(size_t ngpus, bool full) {
  struct metrics_mock *mm = calloc(1, sizeof *mm);
  if (!mm)
    return NULL;
  mm->full = full;
  char err[160];
  if (!full && (!(mm->old_set = calloc(1, sizeof *mm->old_set)) ||
                counters_parse(old_set_csv, sizeof old_set_csv - 1, "old set", mm->old_set, err,
                               sizeof err) != 0)) {
    free(mm->old_set);
    free(mm);
    return NULL;
  }
  mm->hist = history_new(4);
  mm->attrib = attrib_new();
  mm->stats = stats_new();
  buf_init(&mm->plain, HTTP_BODY_MAX);
  /* A one-hour interval keeps the samples fresh however long the bench runs. */
  mm->api = (struct agent_api){.hist = mm->hist,
                               .node_name = "bench-node",
                               .collector_name = "mock",
                               .driver_version = "550.54.15",
                               .interval_ms = 3600000,
                               .pods = mm->attrib};
  mm->ctx = (struct metrics_ctx){&mm->api, mm->attrib, mm->stats, true,   false, mm->old_set, NULL,
                                 false,    false,      300000,    300000, NULL,  NULL};
  if (!mm->hist || !mm->attrib || !mm->stats || mock_fill(mm, ngpus) != 0) {
    metrics_mock_free(mm);
    return NULL;
  }
  return mm;
}

int metrics_mock_render(struct metrics_mock *mm, bool gz, struct buf *out) {
  buf_reset(out);
  if (!gz)
    return metrics_render(&mm->ctx, out);
  buf_reset(&mm->plain);
  int rc = metrics_render(&mm->ctx, &mm->plain);
  return rc ? rc : gzip_compress(mm->plain.data, mm->plain.len, out);
}

struct metrics_ctx *metrics_mock_ctx(struct metrics_mock *mm) {
  return &mm->ctx;
}

void metrics_mock_free(struct metrics_mock *mm) {
  if (!mm)
    return;
  free(mm->old_set);
  history_free(mm->hist);
  attrib_free(mm->attrib);
  stats_free(mm->stats);
  buf_free(&mm->plain);
  free(mm);
}
