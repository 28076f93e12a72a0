/* Prometheus text format writer: dcgm-exporter's names, HELP, label order and value formats for
 * the GPU series, and gpuscale's own series, all rendered from a history snapshot. */
#include "http/exposition.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "http/counters.h"
#include "http/dcgm_names.h"
#include "rpc/status.h"

/* Identity labels (at most 10) + container, the dra_* labels (7), namespace, pod, pod_uid, vgpu,
 * shared, or + a family label. */
#define EXPO_MAX_LABELS 20

/* AMD device-metrics-exporter's series for what ROCm SMI reads (names, HELP texts and types from
 * ROCm/device-metrics-exporter pkg/amdgpu/gpuagent/gpuagent_gpu_metrics.go, all gauges; units from
 * docs/configuration/metricslist.md). mult turns our stored unit into AMD's: energy is kept in mJ
 * and AMD writes uJ. GF_TEMP_C is written under the name of the sensor it reads
 * (gpu_info.temp_sensor); the exporter writes the Go client's shortest float text. */
static const struct amd_family {
  enum gpu_field f;
  const char *name, *help;
  double mult;
} amd_families[] = {
    {GF_GPU_UTIL, "gpu_gfx_activity", "Graphics engine usage in Percentage (0-100)", 1},
    {GF_MEM_UTIL, "gpu_umc_activity", "Memory engine usage in Percentage (0-100)", 1},
    {GF_MEM_USED_MIB, "gpu_used_vram", "Used VRAM memory of the GPU (in MB)", 1},
    {GF_MEM_FREE_MIB, "gpu_free_vram", "Free VRAM memory of the GPU (in MB)", 1},
    {GF_MEM_TOTAL_MIB, "gpu_total_vram", "Total VRAM memory of the GPU (in MB)", 1},
    {GF_POWER_W, "gpu_power_usage", "GPU Power usage in Watts", 1},
    /* exporter 1.5 (v1.5.1 gpuagent_gpu_metrics.go): ROCm SMI's reading is the average socket
     * power (rsmi_dev_power_ave_get), the quantity of its gpu_average_package_power. Its
     * gpu_package_power (current socket power, MI3xx) needs rsmi_dev_current_socket_power_get,
     * which Debian's ROCm SMI 5.2 does not have: not written. */
    {GF_POWER_W, "gpu_average_package_power", "Average socket power in Watts", 1},
    {GF_TEMP_C, "gpu_junction_temperature", "Current junction/hotspot temperature in Celsius", 1},
    {GF_TEMP_C, "gpu_edge_temperature", "Current edge temperature in Celsius", 1},
    {GF_MEM_TEMP_C, "gpu_memory_temperature", "Current memory temperature in Celsius", 1},
    {GF_ENERGY_MJ, "gpu_energy_consumed", "Accumulated energy consumed by the GPU in uJ", 1000},
    {GF_PCIE_REPLAY, "pcie_replay_count", "Total number of PCIe replays", 1},
};
#define NAMD (sizeof amd_families / sizeof amd_families[0])

/* err_msg for the XIDs that clusters see most, with the text dcgm-exporter writes for them (from
 * NVIDIA's XID catalogue), so that the series match; another code gets err_code only, never a
 * guessed text. */
static const struct {
  int code;
  const char *msg;
} xid_msgs[] = {
    {0, "No Error"},
    {13, "Graphics Engine Exception"},
    {31, "GPU memory page fault"},
    {32, "Invalid or corrupted push buffer stream"},
    {43, "GPU stopped processing"},
    {45, "Preemptive cleanup, due to previous errors -- Most likely to see when running multiple "
         "cuda"},
    {48, "Double Bit ECC Error"},
    {61, "Internal micro-controller breakpoint/warning"},
    {62, "Internal micro-controller halt"},
    {63, "ECC page retirement or row remapping recording event"},
    {64, "ECC page retirement or row remapper recording failure"},
    {74, "NVLINK Error"},
    {79, "GPU has fallen off the bus"},
    {92, "High single-bit ECC error rate"},
    {94, "Contained ECC error"},
    {95, "Uncontained ECC error"},
    {119, "GSP RPC Timeout"},
    {120, "GSP Error"},
};

/* A GPU's identity labels, built once per scrape, with storage for the formatted numbers. */
struct gpu_ids {
  struct expo_label l[EXPO_MAX_LABELS];
  size_t n;
  char gpu[24], device[32], gi_id[24];
  const char *uuid; /* the UUID label's value (a MIG instance's parent) */
  bool mig;         /* GPU_I_ID = gi_id */
  /* The labels above as text, escaped once per scrape: every series of the GPU starts with it. */
  const char *pre;
  size_t pre_off, pre_len;
};

int expo_escape_label(struct buf *b, const char *v) {
  const char *run = v;
  int rc = 0;
  for (const char *p = v; *p && !rc; p++) {
    const char *esc = *p == '\\' ? "\\\\" : *p == '"' ? "\\\"" : *p == '\n' ? "\\n" : NULL;
    if (!esc)
      continue;
    if ((rc = buf_append(b, run, (size_t)(p - run))) == 0)
      rc = buf_append(b, esc, 2);
    run = p + 1;
  }
  return rc ? rc : buf_puts(b, run);
}

static int escape_help(struct buf *b, const char *v) {
  const char *run = v;
  int rc = 0;
  for (const char *p = v; *p && !rc; p++) {
    const char *esc = *p == '\\' ? "\\\\" : *p == '\n' ? "\\n" : NULL;
    if (!esc)
      continue;
    if ((rc = buf_append(b, run, (size_t)(p - run))) == 0)
      rc = buf_append(b, esc, 2);
    run = p + 1;
  }
  return rc ? rc : buf_puts(b, run);
}

int expo_family(struct buf *b, const char *name, const char *type, const char *help) {
  int rc = buf_printf(b, "# HELP %s ", name);
  if (!rc)
    rc = escape_help(b, help);
  if (!rc)
    rc = buf_printf(b, "\n# TYPE %s %s\n", name, type);
  return rc;
}

int expo_sample(struct buf *b, const char *name, const struct expo_label *labels, size_t n,
                const char *value) {
  int rc = buf_puts(b, name);
  for (size_t i = 0; i < n && !rc; i++) {
    rc = buf_puts(b, i == 0 ? "{" : ",");
    if (!rc)
      rc = buf_puts(b, labels[i].name);
    if (!rc)
      rc = buf_puts(b, "=\"");
    if (!rc)
      rc = expo_escape_label(b, labels[i].value);
    if (!rc)
      rc = buf_puts(b, "\"");
  }
  if (!rc && n)
    rc = buf_puts(b, "}");
  if (!rc)
    rc = buf_append(b, " ", 1);
  if (!rc)
    rc = buf_puts(b, value);
  return rc ? rc : buf_append(b, "\n", 1);
}

void expo_format_double(double v, char *out, size_t len) {
  if (isnan(v)) {
    snprintf(out, len, "NaN");
    return;
  }
  if (isinf(v)) {
    snprintf(out, len, v > 0 ? "+Inf" : "-Inf");
    return;
  }
  /* The shortest of %.15g .. %.17g that reads back exactly: 0.1 prints as "0.1", not as
   * "0.10000000000000001". */
  for (int prec = 15; prec <= 17; prec++) {
    snprintf(out, len, "%.*g", prec, v);
    if (strtod(out, NULL) == v)
      return;
  }
}

/* One series as this scrape writes it: the reading, the name and the unit the name says. */
struct series {
  enum gpu_field f;
  const char *name;
  struct expo_unit u;
};

static void format_value(double v, struct expo_unit u, char *out, size_t len) {
  v = v * u.mul / u.div;
  switch (u.fmt) {
  case VF_INT: snprintf(out, len, "%lld", (long long)llround(v)); return;
  case VF_F6: snprintf(out, len, "%f", v); return;
  case VF_SHORT: expo_format_double(v, out, len); return;
  }
}

static void add_label(struct gpu_ids *g, const char *name, const char *value) {
  if (g->n < EXPO_MAX_LABELS)
    g->l[g->n++] = (struct expo_label){name, value};
}

static const char *host_label(const struct expo_input *in) {
  return in->hostname_label && in->hostname_label[0] ? in->hostname_label : "hostname";
}

/* dcgm-exporter's identity labels. A MIG instance carries its parent GPU's index, UUID and model
 * name (as dcgm-exporter does) and tells itself apart with GPU_I_PROFILE and GPU_I_ID. */
/* AMD device-metrics-exporter's identity labels (its mandatory set that ROCm SMI 5.2 can fill:
 * gpu_id, serial_number, card_model, hostname; the partition labels need a newer library). */
static void gpu_ids_build_amd(struct gpu_ids *g, const struct expo_input *in, size_t i) {
  const struct gpu_info *d = &in->gpus[i].info;
  g->n = 0;
  snprintf(g->gpu, sizeof g->gpu, "%d", d->index);
  g->uuid = d->uuid;
  g->mig = false;
  add_label(g, "gpu_id", g->gpu);
  add_label(g, "serial_number", d->serial);
  add_label(g, "card_model", d->name);
  if (in->hostname && in->hostname[0])
    add_label(g, "hostname", in->hostname);
}

static void gpu_ids_build(struct gpu_ids *g, const struct expo_input *in, size_t i) {
  if (in->amd) {
    gpu_ids_build_amd(g, in, i);
    return;
  }
  const struct gpu_info *d = &in->gpus[i].info;
  const struct gpu_info *parent = NULL;
  if (d->mig)
    for (size_t j = 0; j < in->ngpus && !parent; j++)
      if (!in->gpus[j].info.mig && in->gpus[j].info.index == d->parent_index)
        parent = &in->gpus[j].info;
  g->n = 0;
  snprintf(g->gpu, sizeof g->gpu, "%d",
           d->mig && d->parent_index >= 0 ? d->parent_index : d->index);
  add_label(g, "gpu", g->gpu);
  g->uuid = parent ? parent->uuid : d->uuid;
  g->mig = d->mig;
  add_label(g, "UUID", g->uuid);
  if (d->pci_bus_id[0])
    add_label(g, "pci_bus_id", d->pci_bus_id);
  if (d->minor >= 0) {
    snprintf(g->device, sizeof g->device, "nvidia%d", d->minor);
    add_label(g, "device", g->device);
  }
  add_label(g, "modelName", parent ? parent->name : d->name);
  if (d->mig) {
    snprintf(g->gi_id, sizeof g->gi_id, "%d", d->gi_id);
    add_label(g, "GPU_I_PROFILE", d->mig_profile);
    add_label(g, "GPU_I_ID", g->gi_id);
  }
  if (in->hostname && in->hostname[0])
    add_label(g, host_label(in), in->hostname);
  if (in->driver_version && in->driver_version[0] &&
      (!in->counters || in->counters->driver_version))
    add_label(g, in->names ? in->names->driver_label : expo_driver_label[DCGM_GEN_LEGACY],
              in->driver_version);
}

static bool gpu_fresh(const struct expo_input *in, const struct gpu_snapshot *g) {
  return g->has_sample && in->now_mono_ms - g->latest.mono_ms <= in->stale_ms;
}

/* Value series are shown only for a healthy GPU with a fresh sample: never a stale or made-up
 * reading. */
static bool gpu_serves_values(const struct expo_input *in, const struct gpu_snapshot *g) {
  return g->health == GPU_HEALTH_OK && gpu_fresh(in, g);
}

static const struct gpu_pods *pods_of(const struct expo_input *in, size_t i) {
  return in->pods && in->pods[i].n > 0 ? &in->pods[i] : NULL;
}

/* More than one distinct pod holds the GPU: time-slicing, MPS, vGPU replicas, or one id listed
 * for two pods. Two containers of one pod are one holder: the GPU's work is that pod's. */
static bool pods_several(const struct gpu_pods *pods) {
  return pods && attrib_holders(pods) > 1;
}

/* What Kubernetes says about listed entry p of GPU i, or NULL. */
static const struct attrib_k8s *k8s_of(const struct expo_input *in, size_t i, size_t p) {
  return in->k8s && in->k8s[i] ? &in->k8s[i][p] : NULL;
}

static size_t add_label_if(struct expo_label *l, size_t n, const char *name, const char *value) {
  if (value[0]) /* an empty label is no label to Prometheus: left out */
    l[n++] = (struct expo_label){name, value};
  return n;
}

/* dcgm-exporter's dra_* labels (internal/pkg/transformation/const.go, kubernetes.go; written in
 * the sorted order of its attributes, between container and namespace). */
static size_t add_dra_labels(struct expo_label *l, size_t n, const struct expo_input *in,
                             const struct attrib_k8s *d) {
  if (!d || !in->dra_labels || !d->claim_name[0])
    return n;
  n = add_label_if(l, n, "dra_claim_name", d->claim_name);
  n = add_label_if(l, n, "dra_claim_namespace", d->claim_ns);
  n = add_label_if(l, n, "dra_device_name", d->device);
  n = add_label_if(l, n, "dra_driver_name", d->driver);
  n = add_label_if(l, n, "dra_mig_device_uuid", d->mig_uuid);
  n = add_label_if(l, n, "dra_mig_profile", d->mig_profile);
  return add_label_if(l, n, "dra_pool_name", d->pool);
}

/* dcgm-exporter's pod_uid (its uidAttribute), after pod in the sorted order of its attributes.
 * Like its kubernetes.go, only for a holder through a device plugin: its DRA path writes the claim
 * labels and no pod_uid. */
static size_t add_uid_label(struct expo_label *l, size_t n, const struct expo_input *in,
                            const struct attrib_k8s *d) {
  if (!d || !in->pod_uid || (in->dra_labels && d->claim_name[0]))
    return n;
  return add_label_if(l, n, "pod_uid", d->pod_uid);
}

static size_t add_pod_labels(struct expo_label *l, size_t n, const struct expo_input *in,
                             const struct pod_ref *p, const struct attrib_k8s *d) {
  l[n++] = (struct expo_label){"container", p->container};
  n = add_dra_labels(l, n, in, d);
  l[n++] = (struct expo_label){"namespace", p->ns};
  l[n++] = (struct expo_label){"pod", p->pod};
  return add_uid_label(l, n, in, d);
}

/* The labels of the one pod holding the GPU. container (and, per-pod, vgpu) only when a single
 * container holds it: when two containers of the pod do, naming one would be a guess, so the line
 * names the pod and gpuscale_gpu_pod_info names its containers. */
static size_t add_holder_labels(struct expo_label *l, size_t n, const struct expo_input *in,
                                size_t gpu, const struct gpu_pods *pods) {
  const struct pod_ref *p = &pods->pods[0];
  if (pods->total > 1) {
    l[n++] = (struct expo_label){"namespace", p->ns};
    l[n++] = (struct expo_label){"pod", p->pod};
    return add_uid_label(l, n, in, k8s_of(in, gpu, 0)); /* one pod: one UID */
  }
  n = add_pod_labels(l, n, in, p, k8s_of(in, gpu, 0));
  if (in->shared_series == EXPO_SHARED_PER_POD && p->vgpu[0])
    l[n++] = (struct expo_label){"vgpu", p->vgpu};
  return n;
}

/* One sample line of a GPU: name{<identity labels>,<more>} value, the identity labels from the
 * text escaped once per scrape. */
static int id_sample(struct buf *b, const char *name, const struct gpu_ids *id,
                     const struct expo_label *more, size_t n, const char *value) {
  int rc = buf_puts(b, name);
  if (!rc)
    rc = buf_append(b, "{", 1);
  if (!rc)
    rc = buf_append(b, id->pre, id->pre_len);
  for (size_t i = 0; i < n && !rc; i++) {
    rc = buf_append(b, ",", 1);
    if (!rc)
      rc = buf_puts(b, more[i].name);
    if (!rc)
      rc = buf_append(b, "=\"", 2);
    if (!rc)
      rc = expo_escape_label(b, more[i].value);
    if (!rc)
      rc = buf_append(b, "\"", 1);
  }
  if (!rc)
    rc = buf_append(b, "} ", 2);
  if (!rc)
    rc = buf_puts(b, value);
  return rc ? rc : buf_append(b, "\n", 1);
}

/* The identity labels of g as text ("gpu=\"0\",UUID=..."), appended to pre. */
static int ids_text(struct buf *pre, struct gpu_ids *g) {
  g->pre_off = pre->len;
  int rc = 0;
  for (size_t i = 0; i < g->n && !rc; i++) {
    rc = buf_printf(pre, "%s%s=\"", i ? "," : "", g->l[i].name);
    if (!rc)
      rc = expo_escape_label(pre, g->l[i].value);
    if (!rc)
      rc = buf_append(pre, "\"", 1);
  }
  g->pre_len = pre->len - g->pre_off;
  return rc;
}

/* The value lines of one GPU. No holder: identity labels only. One holder pod: its pod labels
 * (above). Several pods: one line marked gpuscale_shared="true" without pod labels (who holds it
 * is in gpuscale_gpu_pod_info), or, per-pod, one copy per (pod, container) with its pod labels and
 * vgpu. */
/* The families whose per-pod value is the pod's own processes' (dcgm-exporter's
 * isPerProcessMetric: DCGM_FI_DEV_GPU_UTIL and DCGM_FI_DEV_FB_USED). */
static bool per_process_family(const struct series *vf) {
  return vf->f == GF_GPU_UTIL || vf->f == GF_MEM_USED_MIB;
}

/* Listed entry p's own value of vf from its pod's processes, when the process split has it. */
static bool process_value(const struct expo_input *in, const struct series *vf, size_t gpu,
                          size_t p, double *v) {
  const struct attrib_k8s *k = k8s_of(in, gpu, p);
  if (!k)
    return false;
  if (vf->f == GF_GPU_UTIL && k->has_util)
    *v = k->util;
  else if (vf->f == GF_MEM_USED_MIB && k->has_fb)
    *v = k->fb_mib;
  else
    return false;
  return true;
}

/* --shared-gpu-series per-pod with the process split (--host-proc): dcgm-exporter's
 * --kubernetes-virtual-gpus output for GPU_UTIL and FB_USED (its #594, kubernetes.go
 * createPerProcessMetrics): the device line as it is, then a line per holder with its own
 * processes' value and container, namespace, pod, pod_uid, vgpu. Returns 1 when it wrote them, 0
 * when the split has no value for this GPU, or a negative error. */
static int process_lines(struct buf *b, const struct expo_input *in, const struct series *vf,
                         size_t gpu, const struct gpu_ids *id, struct expo_label *l, size_t base,
                         const struct gpu_pods *pods, const char *value) {
  double v;
  bool any = false;
  for (size_t p = 0; p < pods->n && !any; p++)
    any = process_value(in, vf, gpu, p, &v);
  if (!any)
    return 0;
  int rc = id_sample(b, vf->name, id, l, base, value);
  for (size_t p = 0; p < pods->n && !rc; p++) {
    if (!process_value(in, vf, gpu, p, &v))
      continue;
    const struct pod_ref *pr = &pods->pods[p];
    const struct attrib_k8s *k = k8s_of(in, gpu, p);
    size_t n = base;
    l[n++] = (struct expo_label){"container", pr->container};
    l[n++] = (struct expo_label){"namespace", pr->ns};
    l[n++] = (struct expo_label){"pod", pr->pod};
    n = add_label_if(l, n, "pod_uid", k->pod_uid); /* always here, as dcgm-exporter does */
    n = add_label_if(l, n, "vgpu", pr->vgpu);
    char text[64];
    format_value(v, vf->u, text, sizeof text);
    rc = id_sample(b, vf->name, id, l, n, text);
  }
  return rc ? rc : 1;
}

static int value_lines(struct buf *b, const struct expo_input *in, const struct series *vf,
                       size_t gpu, const struct gpu_ids *id, const struct expo_label *extra,
                       size_t nextra, const struct gpu_pods *pods, const char *value) {
  struct expo_label l[EXPO_MAX_LABELS] = {
      0}; /* GCC 12 -O2 cannot see that memcpy fills [0, nextra) */
  memcpy(l, extra, nextra * sizeof l[0]);
  size_t base = nextra;
  if (!pods)
    return id_sample(b, vf->name, id, l, base, value);
  if (in->shared_series == EXPO_SHARED_PER_POD && per_process_family(vf)) {
    int rc = process_lines(b, in, vf, gpu, id, l, base, pods, value);
    if (rc)
      return rc < 0 ? rc : 0;
    if (pods_several(pods)) /* without the split: never the whole GPU's value for each pod */
      return id_sample(b, vf->name, id, l, base, value);
  }
  if (!pods_several(pods))
    return id_sample(b, vf->name, id, l, add_holder_labels(l, base, in, gpu, pods), value);
  if (in->shared_series != EXPO_SHARED_PER_POD) {
    l[base] = (struct expo_label){"gpuscale_shared", "true"};
    return id_sample(b, vf->name, id, l, base + 1, value);
  }
  int rc = 0;
  for (size_t p = 0; p < pods->n && !rc; p++) {
    size_t n = add_pod_labels(l, base, in, &pods->pods[p], k8s_of(in, gpu, p));
    if (pods->pods[p].vgpu[0])
      l[n++] = (struct expo_label){"vgpu", pods->pods[p].vgpu};
    l[n++] = (struct expo_label){"gpuscale_shared", "true"};
    rc = id_sample(b, vf->name, id, l, n, value);
  }
  return rc;
}

/* dcgm-exporter's XID labels: err_code, and err_msg when the code has a known text. */
static size_t xid_labels(struct expo_label *l, double v, char *code, size_t len) {
  long long c = llround(v);
  snprintf(code, len, "%lld", c);
  l[0] = (struct expo_label){"err_code", code};
  for (size_t i = 0; i < sizeof xid_msgs / sizeof xid_msgs[0]; i++)
    if (xid_msgs[i].code == c) {
      l[1] = (struct expo_label){"err_msg", xid_msgs[i].msg};
      return 2;
    }
  return 1;
}

/* AMD's series, then gpuscale's own (VFL_OURS) with the AMD labels. */
static int render_values_amd(struct buf *b, const struct expo_input *in,
                             const struct gpu_ids *ids) {
  struct expo_label none[1] = {{NULL, NULL}};
  char count[32];
  snprintf(count, sizeof count, "%zu", in->ngpus);
  struct expo_label host = {"hostname", in->hostname};
  int rc = expo_family(b, "gpu_nodes_total", "gauge", "Number of GPUs in the node");
  if (!rc)
    rc = expo_sample(b, "gpu_nodes_total", &host, in->hostname && in->hostname[0] ? 1 : 0, count);
  for (size_t k = 0; k < NAMD && !rc; k++) {
    const struct amd_family *af = &amd_families[k];
    const char *sensor = NULL;
    if (af->f == GF_TEMP_C)
      sensor = strcmp(af->name, "gpu_junction_temperature") == 0 ? "junction" : "edge";
    bool header = false;
    for (size_t i = 0; i < in->ngpus && !rc; i++) {
      const struct gpu_snapshot *g = &in->gpus[i];
      if (!gpu_serves_values(in, g) || !sample_has(&g->latest, af->f) ||
          !isfinite(g->latest.v[af->f]) || (sensor && strcmp(g->info.temp_sensor, sensor) != 0))
        continue;
      if (!header)
        rc = expo_family(b, af->name, "gauge", af->help);
      header = true;
      char value[64];
      expo_format_double(g->latest.v[af->f] * af->mult, value, sizeof value);
      struct series vf = {af->f, af->name, {VF_SHORT, 1, 1}};
      if (!rc)
        rc = value_lines(b, in, &vf, i, &ids[i], none, 0, pods_of(in, i), value);
    }
  }
  for (size_t k = 0; k < expo_family_count() && !rc; k++) {
    const struct value_family *fam = expo_family_at(k);
    if (!(fam->flags & VFL_OURS))
      continue;
    struct series sr = {fam->f, fam->name[0], {fam->fmt, 1, 1}}, *vf = &sr;
    /* A family is written once a GPU has it: the NVLink and NVML PCIe series never on AMD. */
    bool header = false;
    for (size_t i = 0; i < in->ngpus && !rc; i++) {
      const struct gpu_snapshot *g = &in->gpus[i];
      if (!gpu_serves_values(in, g) || !sample_has(&g->latest, vf->f) ||
          !isfinite(g->latest.v[vf->f]))
        continue;
      if (!header)
        rc = expo_family(b, vf->name, fam->type, fam->help[0]);
      header = true;
      if (rc)
        break;
      char value[64];
      format_value(g->latest.v[vf->f], vf->u, value, sizeof value);
      rc = value_lines(b, in, vf, i, &ids[i], none, 0, pods_of(in, i), value);
    }
  }
  return rc;
}

static int render_values(struct buf *b, const struct expo_input *in, const struct gpu_ids *ids) {
  if (in->amd)
    return render_values_amd(b, in, ids);
  int rc = 0;
  const struct dcgm_names *nm = in->names;
  enum dcgm_gen gen = nm ? nm->gen : DCGM_GEN_LEGACY;
  for (size_t k = 0; k < expo_family_count() && !rc; k++) {
    const struct value_family *fam = expo_family_at(k);
    if (in->counters ? !counters_on(in->counters, k) : !expo_family_default_gen(k, gen))
      continue;
    struct series sr = {fam->f, nm ? nm->name[k] : fam->name[gen], {fam->fmt, 1, 1}}, *vf = &sr;
    if (nm)
      sr.u = nm->unit[k];
    else
      (void)expo_family_unit(fam, sr.name, &sr.u);
    bool from_file = in->counters && expo_family_selectable(k);
    rc = expo_family(b, vf->name, from_file ? in->counters->type[k] : fam->type,
                     from_file ? in->counters->help[k]
                     : nm      ? nm->help[k]
                               : fam->help[gen]);
    for (size_t i = 0; i < in->ngpus && !rc; i++) {
      const struct gpu_snapshot *g = &in->gpus[i];
      if (!gpu_serves_values(in, g) || !sample_has(&g->latest, vf->f) ||
          !isfinite(g->latest.v[vf->f]) || (g->info.mig && (fam->flags & VFL_CARD)))
        continue;
      char value[64], code[24];
      struct expo_label extra[2];
      size_t nextra = 0;
      format_value(g->latest.v[vf->f], vf->u, value, sizeof value);
      if (fam->flags & VFL_XID)
        nextra = xid_labels(extra, g->latest.v[vf->f], code, sizeof code);
      rc = value_lines(b, in, vf, i, &ids[i], extra, nextra, pods_of(in, i), value);
    }
  }
  return rc;
}

/* dcgm-exporter's DCGM_EXP_XID_ERRORS_COUNT (internal/pkg/collector/xid_collector.go and
 * expcollector.go): per whole GPU, one line per XID code seen in the window with `xid` and
 * `window_size_in_ms`, or one line of 0 without `xid` when there was none. A GPU whose events are
 * not watched, or whose window overflowed the ring, has no line (never a made-up 0). */
static int render_exp_xid(struct buf *b, const struct expo_input *in, const struct gpu_ids *ids) {
  if (in->amd || !in->counters || !in->counters->exp_xid || !in->xid)
    return 0;
  static const struct series vf = {GF_XID_LAST, "DCGM_EXP_XID_ERRORS_COUNT", {VF_INT, 1, 1}};
  int rc = expo_family(b, vf.name, in->counters->exp_xid_type, in->counters->exp_xid_help);
  char window[32];
  snprintf(window, sizeof window, "%" PRId64, in->xid_window_ms);
  for (size_t i = 0; i < in->ngpus && !rc; i++) {
    const struct expo_xid_window *w = &in->xid[i];
    if (!w->known || in->gpus[i].info.mig)
      continue;
    struct expo_label extra[2] = {{"window_size_in_ms", window}, {"xid", NULL}};
    if (w->n == 0) {
      rc = value_lines(b, in, &vf, i, &ids[i], extra, 1, pods_of(in, i), "0");
      continue;
    }
    for (size_t k = 0; k < w->n && !rc; k++) {
      char code[24], value[32];
      snprintf(code, sizeof code, "%llu", w->counts[k].xid);
      snprintf(value, sizeof value, "%" PRIu64, w->counts[k].count);
      extra[1].value = code;
      rc = value_lines(b, in, &vf, i, &ids[i], extra, 2, pods_of(in, i), value);
    }
  }
  return rc;
}

/* dcgm-exporter's clock_event label of each reason bit (clock_events_collector.go's
 * clockEventToString, after DCGM's dcgmi names), bit 0 first. */
static const char *const clock_event_names[COLLECTOR_CLOCK_EVENTS] = {
    "gpu_idle",   "clocks_setting", "power_cap",      "hw_slowdown",    "sync_boost",
    "sw_thermal", "hw_thermal",     "hw_power_brake", "display_clocks",
};

/* dcgm-exporter's DCGM_EXP_CLOCK_EVENTS_COUNT (internal/pkg/collector/clock_events_collector.go
 * and expcollector.go): per whole GPU, one line per reason bit set in at least one sample of the
 * window, valued the samples in which it was set, with `clock_event` and `window_size_in_ms`; one
 * line of 0 without `clock_event` when the window holds no sample; and no line when its samples
 * had no bit set (expcollector.go's entry exists but is empty). A GPU whose reasons are not
 * known for the whole window has no line (never a made-up 0 or a short count). */
static int render_exp_clock(struct buf *b, const struct expo_input *in, const struct gpu_ids *ids) {
  if (in->amd || !in->counters || !in->counters->exp_clock || !in->clock)
    return 0;
  static const struct series vf = {GF_XID_LAST, "DCGM_EXP_CLOCK_EVENTS_COUNT", {VF_INT, 1, 1}};
  int rc = expo_family(b, vf.name, in->counters->exp_clock_type, in->counters->exp_clock_help);
  char window[32];
  snprintf(window, sizeof window, "%" PRId64, in->clock_window_ms);
  for (size_t i = 0; i < in->ngpus && !rc; i++) {
    const struct expo_clock_window *w = &in->clock[i];
    if (!w->known || in->gpus[i].info.mig)
      continue;
    if (w->ev.samples == 0) {
      struct expo_label l[1] = {{"window_size_in_ms", window}};
      rc = value_lines(b, in, &vf, i, &ids[i], l, 1, pods_of(in, i), "0");
      continue;
    }
    for (size_t k = 0; k < COLLECTOR_CLOCK_EVENTS && !rc; k++) {
      if (!w->ev.count[k])
        continue;
      char value[32];
      snprintf(value, sizeof value, "%" PRIu64, w->ev.count[k]);
      struct expo_label l[2] = {{"clock_event", clock_event_names[k]},
                                {"window_size_in_ms", window}};
      rc = value_lines(b, in, &vf, i, &ids[i], l, 2, pods_of(in, i), value);
    }
  }
  return rc;
}

static const char *gpu_state(const struct expo_input *in, const struct gpu_snapshot *g) {
  if (g->health != GPU_HEALTH_OK)
    return gpu_health_name(g->health);
  return gpu_fresh(in, g) ? "ok" : "stale";
}

/* One gpuscale_gpu_pod_info line per (GPU, pod, container) the kubelet lists, whether or not the
 * GPU is shared and whatever the GPU's health: the join keys of the value series (UUID, and
 * GPU_I_ID for a MIG instance), gpu and Hostname for reading it alone, and the pod labels. */
static int render_pod_info(struct buf *b, const struct expo_input *in, const struct gpu_ids *ids) {
  int rc = expo_family(b, "gpuscale_gpu_pod_info", "gauge",
                       "1 for each pod container the kubelet says holds the GPU; join it to the "
                       "GPU series on (UUID, GPU_I_ID).");
  for (size_t i = 0; i < in->ngpus && !rc && in->attribution > 0; i++) {
    const struct gpu_pods *pods = pods_of(in, i);
    for (size_t p = 0; pods && p < pods->n && !rc; p++) {
      struct expo_label l[EXPO_MAX_LABELS];
      size_t n = 0;
      l[n++] = (struct expo_label){in->amd ? "gpu_id" : "gpu", ids[i].gpu};
      if (!in->amd)
        l[n++] = (struct expo_label){"UUID", ids[i].uuid};
      if (ids[i].mig)
        l[n++] = (struct expo_label){"GPU_I_ID", ids[i].gi_id};
      if (in->hostname && in->hostname[0])
        l[n++] = (struct expo_label){in->amd ? "hostname" : host_label(in), in->hostname};
      n = add_pod_labels(l, n, in, &pods->pods[p], k8s_of(in, i, p));
      rc = expo_sample(b, "gpuscale_gpu_pod_info", l, n, "1");
    }
  }
  return rc;
}

/* Per-GPU series of our own: health as a state set, sample age, and pod count. */
static int render_gpu_meta(struct buf *b, const struct expo_input *in, const struct gpu_ids *ids) {
  static const char *const states[] = {"ok", "stale", "error", "lost"};
  int rc = expo_family(b, "gpuscale_gpu_health", "gauge",
                       "GPU health as a state set: 1 for the current state (ok, stale: no "
                       "sample within 3 intervals, error: last read failed, lost), else 0.");
  for (size_t i = 0; i < in->ngpus && !rc; i++) {
    const char *cur = gpu_state(in, &in->gpus[i]);
    for (size_t s = 0; s < sizeof states / sizeof states[0] && !rc; s++) {
      struct expo_label l = {"state", states[s]};
      rc = id_sample(b, "gpuscale_gpu_health", &ids[i], &l, 1,
                     strcmp(cur, states[s]) == 0 ? "1" : "0");
    }
  }
  if (!rc)
    rc = expo_family(b, "gpuscale_gpu_sample_age_seconds", "gauge",
                     "Age of the GPU's newest good sample (in s); absent before the first one.");
  for (size_t i = 0; i < in->ngpus && !rc; i++) {
    const struct gpu_snapshot *g = &in->gpus[i];
    if (!g->has_sample)
      continue;
    char value[64];
    int64_t age = in->now_mono_ms - g->latest.mono_ms;
    expo_format_double((double)(age > 0 ? age : 0) / 1000.0, value, sizeof value);
    rc = id_sample(b, "gpuscale_gpu_sample_age_seconds", &ids[i], NULL, 0, value);
  }
  if (rc || in->attribution < 0)
    return rc;
  rc = expo_family(b, "gpuscale_gpu_pods", "gauge",
                   "Pods holding the GPU according to the kubelet (more than 1: shared).");
  for (size_t i = 0; i < in->ngpus && !rc && in->attribution > 0; i++) {
    char value[32];
    snprintf(value, sizeof value, "%zu", in->pods ? in->pods[i].total : 0);
    rc = id_sample(b, "gpuscale_gpu_pods", &ids[i], NULL, 0, value);
  }
  return rc ? rc : render_pod_info(b, in, ids);
}

static int counter_line(struct buf *b, const char *name, const char *type, const char *help,
                        uint64_t v) {
  char value[32];
  snprintf(value, sizeof value, "%" PRIu64, v);
  int rc = expo_family(b, name, type, help);
  return rc ? rc : expo_sample(b, name, NULL, 0, value);
}

static int render_collect(struct buf *b, const struct expo_collect *c) {
  int rc = counter_line(b, "gpuscale_collections_total", "counter",
                        "Sampling passes over all GPUs completed.", c->passes);
  if (!rc)
    rc = counter_line(b, "gpuscale_device_reads_total", "counter",
                      "Device reads attempted (one per GPU per pass).", c->reads);
  if (!rc)
    rc = expo_family(b, "gpuscale_collection_errors_total", "counter",
                     "Collection errors by reason: lost (GPU fell off the bus or needs a reset), "
                     "read_error (any other failed read), reload_failed (collector reload).");
  const struct {
    const char *reason;
    uint64_t v;
  } errs[] = {
      {"lost", c->lost},
      {"read_error", c->read_errors >= c->lost ? c->read_errors - c->lost : 0},
      {"reload_failed", c->reloads_failed},
  };
  for (size_t i = 0; i < sizeof errs / sizeof errs[0] && !rc; i++) {
    char value[32];
    snprintf(value, sizeof value, "%" PRIu64, errs[i].v);
    struct expo_label l = {"reason", errs[i].reason};
    rc = expo_sample(b, "gpuscale_collection_errors_total", &l, 1, value);
  }
  if (!rc)
    rc = counter_line(b, "gpuscale_collector_reloads_total", "counter",
                      "Collector reloads (SIGHUP) that succeeded.", c->reloads_ok);
  return rc;
}

static int render_rpc(struct buf *b, const struct stats_snapshot *s) {
  int rc = expo_family(b, "gpuscale_grpc_requests_total", "counter",
                       "Finished gRPC calls by full method path and status code.");
  for (size_t i = 0; i < s->n && !rc; i++)
    for (int c = 0; c < STATS_NCODES && !rc; c++) {
      if (!s->m[i].codes[c])
        continue;
      char value[32];
      snprintf(value, sizeof value, "%" PRIu64, s->m[i].codes[c]);
      struct expo_label l[2] = {{"method", s->m[i].name}, {"code", rpc_code_name(c)}};
      rc = expo_sample(b, "gpuscale_grpc_requests_total", l, 2, value);
    }
  if (!rc)
    rc = expo_family(b, "gpuscale_grpc_request_duration_seconds", "histogram",
                     "Duration of finished gRPC calls (in s); a stream counts its whole life.");
  for (size_t i = 0; i < s->n && !rc; i++) {
    const struct stats_method *m = &s->m[i];
    char value[64], le[32];
    struct expo_label l[2] = {{"method", m->name}, {"le", le}};
    for (size_t k = 0; k <= STATS_NBUCKETS && !rc; k++) {
      if (k < STATS_NBUCKETS)
        expo_format_double(stats_buckets[k], le, sizeof le);
      else
        snprintf(le, sizeof le, "+Inf");
      snprintf(value, sizeof value, "%" PRIu64, k < STATS_NBUCKETS ? m->buckets[k] : m->count);
      rc = expo_sample(b, "gpuscale_grpc_request_duration_seconds_bucket", l, 2, value);
    }
    expo_format_double(m->sum, value, sizeof value);
    if (!rc)
      rc = expo_sample(b, "gpuscale_grpc_request_duration_seconds_sum", l, 1, value);
    snprintf(value, sizeof value, "%" PRIu64, m->count);
    if (!rc)
      rc = expo_sample(b, "gpuscale_grpc_request_duration_seconds_count", l, 1, value);
  }
  return rc;
}

int expo_render(struct buf *b, const struct expo_input *in) {
  struct gpu_ids *ids = in->ngpus ? calloc(in->ngpus, sizeof *ids) : NULL;
  if (in->ngpus && !ids)
    return GS_ENOMEM;
  struct buf pre;
  buf_init(&pre, b->max); /* never more than the body it is copied into */
  int rc = 0;
  for (size_t i = 0; i < in->ngpus && !rc; i++) {
    gpu_ids_build(&ids[i], in, i);
    rc = ids_text(&pre, &ids[i]);
  }
  for (size_t i = 0; i < in->ngpus && !rc; i++)
    ids[i].pre = pre.data + ids[i].pre_off;
  if (!rc)
    rc = render_values(b, in, ids);
  if (!rc)
    rc = render_exp_xid(b, in, ids);
  if (!rc)
    rc = render_exp_clock(b, in, ids);
  if (!rc)
    rc = render_gpu_meta(b, in, ids);
  buf_free(&pre);
  free(ids);
  if (!rc && in->collect)
    rc = render_collect(b, in->collect);
  if (!rc && in->attribution >= 0)
    rc = counter_line(b, "gpuscale_attribution_available", "gauge",
                      "1 when the kubelet PodResources API answered the last refresh, else 0.",
                      in->attribution > 0);
  if (!rc)
    rc = expo_render_process(b, in->rpc, in->version);
  return rc;
}

int expo_render_process(struct buf *b, const struct stats_snapshot *rpc, const char *version) {
  int rc = 0;
  if (rpc)
    rc = render_rpc(b, rpc);
  if (!rc && version) {
    struct expo_label l = {"version", version};
    rc = expo_family(b, "gpuscale_build_info", "gauge",
                     "Always 1; the version label is gpuscale's.");
    if (!rc)
      rc = expo_sample(b, "gpuscale_build_info", &l, 1, "1");
  }
  return rc;
}
