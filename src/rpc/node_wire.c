/* Encoding and decoding of gpuscale.v1.NodeSnapshot with protobuf-c; presence bits map one to one
 * between struct gpu_sample.valid and Sample.valid through an explicit table. */
#include "rpc/node_wire.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "node.pb-c.h"

/* Where each reading lives: our field, its stable wire bit, and its Sample member. */
static const struct {
  enum gpu_field f;
  unsigned bit;
  size_t off;
} field_map[] = {
    {GF_GPU_UTIL, GPUSCALE__V1__FIELD__FIELD_GPU_UTILIZATION,
     offsetof(Gpuscale__V1__Sample, gpu_utilization)},
    {GF_MEM_UTIL, GPUSCALE__V1__FIELD__FIELD_MEMORY_UTILIZATION,
     offsetof(Gpuscale__V1__Sample, memory_utilization)},
    {GF_MEM_USED_MIB, GPUSCALE__V1__FIELD__FIELD_MEMORY_USED_MIB,
     offsetof(Gpuscale__V1__Sample, memory_used_mib)},
    {GF_MEM_FREE_MIB, GPUSCALE__V1__FIELD__FIELD_MEMORY_FREE_MIB,
     offsetof(Gpuscale__V1__Sample, memory_free_mib)},
    {GF_MEM_TOTAL_MIB, GPUSCALE__V1__FIELD__FIELD_MEMORY_TOTAL_MIB,
     offsetof(Gpuscale__V1__Sample, memory_total_mib)},
    {GF_MEM_USED_PCT, GPUSCALE__V1__FIELD__FIELD_MEMORY_USED_PERCENT,
     offsetof(Gpuscale__V1__Sample, memory_used_percent)},
    {GF_TEMP_C, GPUSCALE__V1__FIELD__FIELD_TEMPERATURE,
     offsetof(Gpuscale__V1__Sample, temperature)},
    {GF_POWER_W, GPUSCALE__V1__FIELD__FIELD_POWER_DRAW, offsetof(Gpuscale__V1__Sample, power_draw)},
    {GF_ENERGY_MJ, GPUSCALE__V1__FIELD__FIELD_ENERGY, offsetof(Gpuscale__V1__Sample, energy)},
    {GF_SM_CLOCK_MHZ, GPUSCALE__V1__FIELD__FIELD_SM_CLOCK_MHZ,
     offsetof(Gpuscale__V1__Sample, sm_clock_mhz)},
    {GF_MEM_CLOCK_MHZ, GPUSCALE__V1__FIELD__FIELD_MEMORY_CLOCK_MHZ,
     offsetof(Gpuscale__V1__Sample, memory_clock_mhz)},
    {GF_MEM_TEMP_C, GPUSCALE__V1__FIELD__FIELD_MEMORY_TEMPERATURE,
     offsetof(Gpuscale__V1__Sample, memory_temperature)},
    {GF_ENC_UTIL, GPUSCALE__V1__FIELD__FIELD_ENCODER_UTILIZATION,
     offsetof(Gpuscale__V1__Sample, encoder_utilization)},
    {GF_DEC_UTIL, GPUSCALE__V1__FIELD__FIELD_DECODER_UTILIZATION,
     offsetof(Gpuscale__V1__Sample, decoder_utilization)},
    {GF_PCIE_REPLAY, GPUSCALE__V1__FIELD__FIELD_PCIE_REPLAY_COUNT,
     offsetof(Gpuscale__V1__Sample, pcie_replay_count)},
    {GF_XID_LAST, GPUSCALE__V1__FIELD__FIELD_XID_LAST, offsetof(Gpuscale__V1__Sample, xid_last)},
    {GF_MEM_RESERVED_MIB, GPUSCALE__V1__FIELD__FIELD_MEMORY_RESERVED_MIB,
     offsetof(Gpuscale__V1__Sample, memory_reserved_mib)},
    {GF_NVLINK_BW_TOTAL, GPUSCALE__V1__FIELD__FIELD_NVLINK_BANDWIDTH_TOTAL,
     offsetof(Gpuscale__V1__Sample, nvlink_bandwidth_total)},
    {GF_ROWS_REMAP_CORR, GPUSCALE__V1__FIELD__FIELD_REMAPPED_ROWS_CORRECTABLE,
     offsetof(Gpuscale__V1__Sample, remapped_rows_correctable)},
    {GF_ROWS_REMAP_UNCORR, GPUSCALE__V1__FIELD__FIELD_REMAPPED_ROWS_UNCORRECTABLE,
     offsetof(Gpuscale__V1__Sample, remapped_rows_uncorrectable)},
    {GF_ROW_REMAP_FAILURE, GPUSCALE__V1__FIELD__FIELD_ROW_REMAP_FAILURE,
     offsetof(Gpuscale__V1__Sample, row_remap_failure)},
    {GF_VGPU_LICENSE, GPUSCALE__V1__FIELD__FIELD_VGPU_LICENSE_STATUS,
     offsetof(Gpuscale__V1__Sample, vgpu_license_status)},
    {GF_GR_ENGINE_ACTIVE, GPUSCALE__V1__FIELD__FIELD_GR_ENGINE_ACTIVE,
     offsetof(Gpuscale__V1__Sample, gr_engine_active)},
    {GF_SM_ACTIVE, GPUSCALE__V1__FIELD__FIELD_SM_ACTIVE, offsetof(Gpuscale__V1__Sample, sm_active)},
    {GF_SM_OCCUPANCY, GPUSCALE__V1__FIELD__FIELD_SM_OCCUPANCY,
     offsetof(Gpuscale__V1__Sample, sm_occupancy)},
    {GF_TENSOR_ACTIVE, GPUSCALE__V1__FIELD__FIELD_TENSOR_ACTIVE,
     offsetof(Gpuscale__V1__Sample, tensor_active)},
    {GF_DRAM_ACTIVE, GPUSCALE__V1__FIELD__FIELD_DRAM_ACTIVE,
     offsetof(Gpuscale__V1__Sample, dram_active)},
    {GF_PROF_PCIE_TX_BPS, GPUSCALE__V1__FIELD__FIELD_PROF_PCIE_TX_BYTES,
     offsetof(Gpuscale__V1__Sample, prof_pcie_tx_bytes)},
    {GF_PROF_PCIE_RX_BPS, GPUSCALE__V1__FIELD__FIELD_PROF_PCIE_RX_BYTES,
     offsetof(Gpuscale__V1__Sample, prof_pcie_rx_bytes)},
    {GF_PCIE_TX_KBPS, GPUSCALE__V1__FIELD__FIELD_PCIE_TX_KBPS,
     offsetof(Gpuscale__V1__Sample, pcie_tx_kbps)},
    {GF_PCIE_RX_KBPS, GPUSCALE__V1__FIELD__FIELD_PCIE_RX_KBPS,
     offsetof(Gpuscale__V1__Sample, pcie_rx_kbps)},
    {GF_NVLINK_TX_MBPS, GPUSCALE__V1__FIELD__FIELD_NVLINK_TX_MBPS,
     offsetof(Gpuscale__V1__Sample, nvlink_tx_mbps)},
    {GF_NVLINK_RX_MBPS, GPUSCALE__V1__FIELD__FIELD_NVLINK_RX_MBPS,
     offsetof(Gpuscale__V1__Sample, nvlink_rx_mbps)},
    {GF_POWER_LIMIT_W, GPUSCALE__V1__FIELD__FIELD_POWER_LIMIT,
     offsetof(Gpuscale__V1__Sample, power_limit)},
    {GF_ENFORCED_LIMIT_W, GPUSCALE__V1__FIELD__FIELD_ENFORCED_POWER_LIMIT,
     offsetof(Gpuscale__V1__Sample, enforced_power_limit)},
    {GF_FABRIC_HEALTH_MASK, GPUSCALE__V1__FIELD__FIELD_FABRIC_HEALTH_MASK,
     offsetof(Gpuscale__V1__Sample, fabric_health_mask)},
    {GF_FABRIC_HEALTH_SUMMARY, GPUSCALE__V1__FIELD__FIELD_FABRIC_HEALTH_SUMMARY,
     offsetof(Gpuscale__V1__Sample, fabric_health_summary)},
};
#define NFIELDS (sizeof field_map / sizeof field_map[0])
_Static_assert(NFIELDS == GF__COUNT, "every field has a wire bit");

/* Where each engine signal lives: its stable wire bit and its EnginePod member. */
static const struct {
  enum engine_signal s;
  unsigned bit;
  size_t off;
} signal_map[] = {
    {ES_VLLM_QUEUE_DEPTH, GPUSCALE__V1__ENGINE_SIGNAL__ENGINE_SIGNAL_VLLM_QUEUE_DEPTH,
     offsetof(Gpuscale__V1__EnginePod, vllm_queue_depth)},
    {ES_VLLM_RUNNING, GPUSCALE__V1__ENGINE_SIGNAL__ENGINE_SIGNAL_VLLM_REQUESTS_RUNNING,
     offsetof(Gpuscale__V1__EnginePod, vllm_requests_running)},
    {ES_VLLM_KV_CACHE, GPUSCALE__V1__ENGINE_SIGNAL__ENGINE_SIGNAL_VLLM_KV_CACHE_USAGE,
     offsetof(Gpuscale__V1__EnginePod, vllm_kv_cache_usage)},
    {ES_TGI_QUEUE, GPUSCALE__V1__ENGINE_SIGNAL__ENGINE_SIGNAL_TGI_QUEUE_SIZE,
     offsetof(Gpuscale__V1__EnginePod, tgi_queue_size)},
    {ES_TGI_BATCH, GPUSCALE__V1__ENGINE_SIGNAL__ENGINE_SIGNAL_TGI_BATCH_SIZE,
     offsetof(Gpuscale__V1__EnginePod, tgi_batch_size)},
    {ES_SGLANG_QUEUE, GPUSCALE__V1__ENGINE_SIGNAL__ENGINE_SIGNAL_SGLANG_QUEUE_DEPTH,
     offsetof(Gpuscale__V1__EnginePod, sglang_queue_depth)},
    {ES_SGLANG_TOKEN_USAGE, GPUSCALE__V1__ENGINE_SIGNAL__ENGINE_SIGNAL_SGLANG_TOKEN_USAGE,
     offsetof(Gpuscale__V1__EnginePod, sglang_token_usage)},
    {ES_TRITON_PENDING, GPUSCALE__V1__ENGINE_SIGNAL__ENGINE_SIGNAL_TRITON_PENDING_REQUESTS,
     offsetof(Gpuscale__V1__EnginePod, triton_pending_requests)},
    {ES_TRITON_QUEUE_WAIT_MS, GPUSCALE__V1__ENGINE_SIGNAL__ENGINE_SIGNAL_TRITON_QUEUE_WAIT_MS,
     offsetof(Gpuscale__V1__EnginePod, triton_queue_wait_ms)},
    {ES_TRITON_REQUEST_RATE, GPUSCALE__V1__ENGINE_SIGNAL__ENGINE_SIGNAL_TRITON_REQUEST_RATE,
     offsetof(Gpuscale__V1__EnginePod, triton_request_rate)},
    {ES_TRTLLM_ACTIVE, GPUSCALE__V1__ENGINE_SIGNAL__ENGINE_SIGNAL_TRTLLM_ACTIVE_REQUESTS,
     offsetof(Gpuscale__V1__EnginePod, trtllm_active_requests)},
    {ES_TRTLLM_QUEUED, GPUSCALE__V1__ENGINE_SIGNAL__ENGINE_SIGNAL_TRTLLM_QUEUED_REQUESTS,
     offsetof(Gpuscale__V1__EnginePod, trtllm_queued_requests)},
    {ES_SGLANG_RUNNING, GPUSCALE__V1__ENGINE_SIGNAL__ENGINE_SIGNAL_SGLANG_REQUESTS_RUNNING,
     offsetof(Gpuscale__V1__EnginePod, sglang_requests_running)},
    {ES_VLLM_TTFT, GPUSCALE__V1__ENGINE_SIGNAL__ENGINE_SIGNAL_VLLM_TTFT_SECONDS,
     offsetof(Gpuscale__V1__EnginePod, vllm_ttft_seconds)},
    {ES_VLLM_QUEUE_TIME, GPUSCALE__V1__ENGINE_SIGNAL__ENGINE_SIGNAL_VLLM_QUEUE_TIME_SECONDS,
     offsetof(Gpuscale__V1__EnginePod, vllm_queue_time_seconds)},
    {ES_VLLM_ITL, GPUSCALE__V1__ENGINE_SIGNAL__ENGINE_SIGNAL_VLLM_INTER_TOKEN_LATENCY_SECONDS,
     offsetof(Gpuscale__V1__EnginePod, vllm_inter_token_latency_seconds)},
    {ES_SGLANG_TTFT, GPUSCALE__V1__ENGINE_SIGNAL__ENGINE_SIGNAL_SGLANG_TTFT_SECONDS,
     offsetof(Gpuscale__V1__EnginePod, sglang_ttft_seconds)},
    {ES_SGLANG_QUEUE_TIME, GPUSCALE__V1__ENGINE_SIGNAL__ENGINE_SIGNAL_SGLANG_QUEUE_TIME_SECONDS,
     offsetof(Gpuscale__V1__EnginePod, sglang_queue_time_seconds)},
    {ES_SGLANG_ITL, GPUSCALE__V1__ENGINE_SIGNAL__ENGINE_SIGNAL_SGLANG_INTER_TOKEN_LATENCY_SECONDS,
     offsetof(Gpuscale__V1__EnginePod, sglang_inter_token_latency_seconds)},
    {ES_VLLM_WAITING_TOKENS, GPUSCALE__V1__ENGINE_SIGNAL__ENGINE_SIGNAL_VLLM_WAITING_PROMPT_TOKENS,
     offsetof(Gpuscale__V1__EnginePod, vllm_waiting_prompt_tokens)},
    {ES_VLLM_PREFILL_RATE,
     GPUSCALE__V1__ENGINE_SIGNAL__ENGINE_SIGNAL_VLLM_PREFILL_TOKENS_PER_SECOND,
     offsetof(Gpuscale__V1__EnginePod, vllm_prefill_tokens_per_second)},
    {ES_SGLANG_WAITING_TOKENS,
     GPUSCALE__V1__ENGINE_SIGNAL__ENGINE_SIGNAL_SGLANG_WAITING_PROMPT_TOKENS,
     offsetof(Gpuscale__V1__EnginePod, sglang_waiting_prompt_tokens)},
    {ES_SGLANG_PREFILL_RATE,
     GPUSCALE__V1__ENGINE_SIGNAL__ENGINE_SIGNAL_SGLANG_PREFILL_TOKENS_PER_SECOND,
     offsetof(Gpuscale__V1__EnginePod, sglang_prefill_tokens_per_second)},
    {ES_TGI_TTFT, GPUSCALE__V1__ENGINE_SIGNAL__ENGINE_SIGNAL_TGI_TTFT_SECONDS,
     offsetof(Gpuscale__V1__EnginePod, tgi_ttft_seconds)},
    {ES_TGI_QUEUE_TIME, GPUSCALE__V1__ENGINE_SIGNAL__ENGINE_SIGNAL_TGI_QUEUE_TIME_SECONDS,
     offsetof(Gpuscale__V1__EnginePod, tgi_queue_time_seconds)},
    {ES_TRITON_TTFT, GPUSCALE__V1__ENGINE_SIGNAL__ENGINE_SIGNAL_TRITON_TTFT_SECONDS,
     offsetof(Gpuscale__V1__EnginePod, triton_ttft_seconds)},
};
#define NSIGNALS (sizeof signal_map / sizeof signal_map[0])
_Static_assert(NSIGNALS == ES__COUNT, "every engine signal has a wire bit");

/* The signals an EngineModel carries (Triton's), with their EngineModel member. */
static const struct {
  enum engine_signal s;
  size_t off;
} model_map[] = {
    {ES_TRITON_PENDING, offsetof(Gpuscale__V1__EngineModel, triton_pending_requests)},
    {ES_TRITON_QUEUE_WAIT_MS, offsetof(Gpuscale__V1__EngineModel, triton_queue_wait_ms)},
    {ES_TRITON_REQUEST_RATE, offsetof(Gpuscale__V1__EngineModel, triton_request_rate)},
    {ES_TRTLLM_ACTIVE, offsetof(Gpuscale__V1__EngineModel, trtllm_active_requests)},
    {ES_TRTLLM_QUEUED, offsetof(Gpuscale__V1__EngineModel, trtllm_queued_requests)},
};

/* The wire bit of a signal. */
static unsigned signal_bit(enum engine_signal s) {
  for (size_t k = 0; k < NSIGNALS; k++)
    if (signal_map[k].s == s)
      return (unsigned)signal_map[k].bit;
  return 63;
}

static double *model_slot(Gpuscale__V1__EngineModel *m, size_t off) {
  return (double *)(void *)((char *)m + off);
}

static const struct {
  enum engine_kind k;
  int wire;
} kind_map[] = {
    {ENGINE_VLLM, GPUSCALE__V1__ENGINE_KIND__ENGINE_KIND_VLLM},
    {ENGINE_TGI, GPUSCALE__V1__ENGINE_KIND__ENGINE_KIND_TGI},
    {ENGINE_SGLANG, GPUSCALE__V1__ENGINE_KIND__ENGINE_KIND_SGLANG},
    {ENGINE_TRITON, GPUSCALE__V1__ENGINE_KIND__ENGINE_KIND_TRITON},
};

static double *engine_slot(Gpuscale__V1__EnginePod *m, size_t off) {
  return (double *)(void *)((char *)m + off);
}

static double *sample_slot(Gpuscale__V1__Sample *m, size_t off) {
  return (double *)(void *)((char *)m + off);
}

/* protobuf-c wants char * even for strings it only reads while packing. */
static char *wire_str(const char *s) {
  return (char *)(uintptr_t)s;
}

/* Everything one encode allocates, released in one place. */
struct enc {
  Gpuscale__V1__GPU *gpus;
  Gpuscale__V1__GPU **gpu_ptrs;
  Gpuscale__V1__Sample *samples;
  Gpuscale__V1__Mig *migs;
  Gpuscale__V1__PodRef *pods;
  Gpuscale__V1__PodRef **pod_ptrs;
  Gpuscale__V1__EnginePod *engines;
  Gpuscale__V1__EnginePod **engine_ptrs;
  Gpuscale__V1__EngineModel *models;      /* ENGINE_MAX_MODELS per engine pod */
  Gpuscale__V1__EngineModel **model_ptrs; /* likewise */
  Gpuscale__V1__EngineLatency *lats;      /* ENGINE_LAT_FAMILIES per engine pod */
  Gpuscale__V1__EngineLatency **lat_ptrs; /* likewise */
};

static void enc_free(struct enc *e) {
  free(e->lats);
  free(e->lat_ptrs);
  free(e->models);
  free(e->model_ptrs);
  free(e->engines);
  free(e->engine_ptrs);
  free(e->gpus);
  free(e->gpu_ptrs);
  free(e->samples);
  free(e->migs);
  free(e->pods);
  free(e->pod_ptrs);
}

static void encode_sample(const struct gpu_sample *s, Gpuscale__V1__Sample *m) {
  *m = (Gpuscale__V1__Sample)GPUSCALE__V1__SAMPLE__INIT;
  m->timestamp_ms = s->ts_ms;
  for (size_t k = 0; k < NFIELDS; k++) {
    if (!sample_has(s, field_map[k].f))
      continue;
    m->valid |= UINT64_C(1) << field_map[k].bit;
    *sample_slot(m, field_map[k].off) = s->v[field_map[k].f];
  }
  for (size_t k = 0; k < NFIELDS; k++)
    if (sample_failed(s, field_map[k].f) && !sample_has(s, field_map[k].f))
      m->failed |= UINT64_C(1) << field_map[k].bit;
}

static void encode_gpu(const struct node_gpu *g, Gpuscale__V1__GPU *m, struct enc *e, size_t i,
                       size_t *next_pod) {
  *m = (Gpuscale__V1__GPU)GPUSCALE__V1__GPU__INIT;
  m->index = g->info.index;
  m->uuid = wire_str(g->info.uuid);
  m->name = wire_str(g->info.name);
  m->pci_bus_id = wire_str(g->info.pci_bus_id);
  m->minor = g->info.minor;
  if (g->info.mig) {
    Gpuscale__V1__Mig *mig = &e->migs[i];
    *mig = (Gpuscale__V1__Mig)GPUSCALE__V1__MIG__INIT;
    mig->parent_index = g->info.parent_index;
    mig->gpu_instance_id = g->info.gi_id;
    mig->profile = wire_str(g->info.mig_profile);
    m->mig = mig;
  }
  switch (g->health) {
  case GPU_HEALTH_OK: m->health = GPUSCALE__V1__HEALTH__HEALTH_OK; break;
  case GPU_HEALTH_LOST: m->health = GPUSCALE__V1__HEALTH__HEALTH_LOST; break;
  default: m->health = GPUSCALE__V1__HEALTH__HEALTH_ERROR; break;
  }
  m->reason = wire_str(g->reason);
  if (g->has_sample) {
    encode_sample(&g->latest, &e->samples[i]);
    m->latest = &e->samples[i];
    m->age_ms = g->age_ms;
  }
  m->fresh = g->fresh;
  size_t np = g->pods.n < ATTRIB_MAX_PODS ? g->pods.n : ATTRIB_MAX_PODS;
  m->n_pods = np;
  m->pods = np ? &e->pod_ptrs[*next_pod] : NULL;
  for (size_t k = 0; k < np; k++) {
    Gpuscale__V1__PodRef *p = &e->pods[*next_pod];
    *p = (Gpuscale__V1__PodRef)GPUSCALE__V1__POD_REF__INIT;
    p->namespace_ = wire_str(g->pods.pods[k].ns);
    p->pod = wire_str(g->pods.pods[k].pod);
    p->container = wire_str(g->pods.pods[k].container);
    p->share = g->pods.split != ATTRIB_SPLIT_NONE ? g->pods.pods[k].share : 0;
    p->group = g->pods.pods[k].group;
    e->pod_ptrs[*next_pod] = p;
    (*next_pod)++;
  }
  size_t total = g->pods.total > np ? g->pods.total : np;
  m->pods_total = total > UINT32_MAX ? UINT32_MAX : (uint32_t)total;
  m->shared = g->pods.shared;
  m->holders = g->pods.holders > UINT32_MAX ? UINT32_MAX : (uint32_t)g->pods.holders;
  switch (g->pods.split) {
  case ATTRIB_SPLIT_EVEN: m->share_method = GPUSCALE__V1__SHARE_METHOD__SHARE_METHOD_EVEN; break;
  case ATTRIB_SPLIT_PROCESS:
    m->share_method = GPUSCALE__V1__SHARE_METHOD__SHARE_METHOD_PROCESS;
    break;
  default: m->share_method = GPUSCALE__V1__SHARE_METHOD__SHARE_METHOD_UNSPECIFIED; break;
  }
}

/* The models of r into mm / mp (ENGINE_MAX_MODELS slots each). */
static void encode_models(const struct engine_reading *r, Gpuscale__V1__EnginePod *m,
                          Gpuscale__V1__EngineModel *mm, Gpuscale__V1__EngineModel **mp) {
  size_t n = r->n_models < ENGINE_MAX_MODELS ? r->n_models : ENGINE_MAX_MODELS;
  for (size_t i = 0; i < n; i++) {
    const struct engine_model *em = &r->models[i];
    mm[i] = (Gpuscale__V1__EngineModel)GPUSCALE__V1__ENGINE_MODEL__INIT;
    mm[i].name = wire_str(em->name);
    mm[i].version = wire_str(em->version);
    for (size_t k = 0; k < sizeof model_map / sizeof *model_map; k++) {
      if (!(em->valid & ES_BIT(model_map[k].s)))
        continue;
      mm[i].valid |= UINT64_C(1) << signal_bit(model_map[k].s);
      *model_slot(&mm[i], model_map[k].off) = em->v[model_map[k].s];
    }
    mp[i] = &mm[i];
  }
  m->n_models = n;
  m->models = n ? mp : NULL;
  m->models_total = r->models_total > n ? r->models_total : (uint32_t)n;
}
_Static_assert(
    (int)GPUSCALE__V1__ENGINE_POD_STATE__ENGINE_POD_STATE_SERVING == ENGINE_POD_SERVING &&
        (int)GPUSCALE__V1__ENGINE_POD_STATE__ENGINE_POD_STATE_NOT_READY == ENGINE_POD_NOT_READY &&
        (int)GPUSCALE__V1__ENGINE_POD_STATE__ENGINE_POD_STATE_TERMINATING ==
            ENGINE_POD_TERMINATING &&
        (int)GPUSCALE__V1__ENGINE_POD_STATE__ENGINE_POD_STATE_LWS_WORKER == ENGINE_POD_LWS_WORKER &&
        ENGINE_POD__COUNT == 4,
    "engine pod states have the wire's numbers");

/* The histograms of r's latency signals into lats/ptrs (ENGINE_LAT_FAMILIES slots); the doubles
 * point into r, which outlives the packing. */
static void encode_latency(const struct engine_reading *r, Gpuscale__V1__EnginePod *m,
                           Gpuscale__V1__EngineLatency *lats, Gpuscale__V1__EngineLatency **ptrs) {
  size_t n = 0;
  for (size_t k = 0; k < NSIGNALS && n < ENGINE_LAT_FAMILIES; k++) {
    int f = engine_signal_latency(signal_map[k].s);
    if (f < 0 || !engine_has(r, signal_map[k].s))
      continue;
    Gpuscale__V1__EngineLatency *l = &lats[n];
    *l = (Gpuscale__V1__EngineLatency)GPUSCALE__V1__ENGINE_LATENCY__INIT;
    l->signal = (Gpuscale__V1__EngineSignal)signal_map[k].bit;
    l->n_le = l->n_count = r->lat[f].n;
    l->le = (double *)(uintptr_t)r->lat[f].le;
    l->count = (double *)(uintptr_t)r->lat[f].cum;
    ptrs[n] = l;
    n++;
  }
  m->n_latency = n;
  m->latency = n ? ptrs : NULL;
}

static void encode_engine(const struct engine_reading *r, Gpuscale__V1__EnginePod *m) {
  *m = (Gpuscale__V1__EnginePod)GPUSCALE__V1__ENGINE_POD__INIT;
  m->namespace_ = wire_str(r->ns);
  m->pod = wire_str(r->pod);
  m->engine = GPUSCALE__V1__ENGINE_KIND__ENGINE_KIND_UNKNOWN;
  for (size_t k = 0; k < sizeof kind_map / sizeof kind_map[0]; k++)
    if (kind_map[k].k == r->kind)
      m->engine = (Gpuscale__V1__EngineKind)kind_map[k].wire;
  m->timestamp_ms = r->ts_ms;
  m->fresh = r->fresh;
  m->reason = wire_str(r->reason);
  m->state = (Gpuscale__V1__EnginePodState)r->state; /* the same numbers, checked below */
  for (size_t k = 0; k < NSIGNALS; k++) {
    if (!engine_has(r, signal_map[k].s))
      continue;
    m->valid |= UINT64_C(1) << signal_map[k].bit;
    *engine_slot(m, signal_map[k].off) = r->v[signal_map[k].s];
  }
}

int node_wire_encode(const struct node_snapshot *s, size_t max, uint8_t **out, size_t *len) {
  *out = NULL;
  *len = 0;
  if (s->n > NODE_MAX_GPUS || s->n_engines > ENGINE_MAX_PODS)
    return GS_ETOOBIG;
  size_t npods = 0;
  for (size_t i = 0; i < s->n; i++)
    npods += s->gpus[i].pods.n < ATTRIB_MAX_PODS ? s->gpus[i].pods.n : ATTRIB_MAX_PODS;
  struct enc e = {0};
  size_t ng = s->n ? s->n : 1;
  e.gpus = calloc(ng, sizeof *e.gpus);
  e.gpu_ptrs = calloc(ng, sizeof *e.gpu_ptrs);
  e.samples = calloc(ng, sizeof *e.samples);
  e.migs = calloc(ng, sizeof *e.migs);
  e.pods = calloc(npods ? npods : 1, sizeof *e.pods);
  e.pod_ptrs = calloc(npods ? npods : 1, sizeof *e.pod_ptrs);
  size_t ne = s->engines ? s->n_engines : 0;
  e.engines = calloc(ne ? ne : 1, sizeof *e.engines);
  e.engine_ptrs = calloc(ne ? ne : 1, sizeof *e.engine_ptrs);
  size_t nm = 0; /* model slots: only pods that list models take any */
  for (size_t i = 0; i < ne; i++)
    nm += s->engines[i].n_models ? ENGINE_MAX_MODELS : 0;
  e.models = calloc(nm ? nm : 1, sizeof *e.models);
  e.model_ptrs = calloc(nm ? nm : 1, sizeof *e.model_ptrs);
  e.lats = calloc(ne ? ne * ENGINE_LAT_FAMILIES : 1, sizeof *e.lats);
  e.lat_ptrs = calloc(ne ? ne * ENGINE_LAT_FAMILIES : 1, sizeof *e.lat_ptrs);
  if (!e.lats || !e.lat_ptrs || !e.gpus || !e.gpu_ptrs || !e.samples || !e.migs || !e.pods ||
      !e.pod_ptrs || !e.engines || !e.engine_ptrs || !e.models || !e.model_ptrs) {
    enc_free(&e);
    return GS_ENOMEM;
  }
  Gpuscale__V1__NodeSnapshot m = GPUSCALE__V1__NODE_SNAPSHOT__INIT;
  m.node = wire_str(s->node);
  m.driver_version = wire_str(s->driver_version);
  m.interval_ms = s->interval_ms;
  m.generation = s->generation;
  m.taken_ms = s->taken_ms;
  m.attribution = s->attribution;
  size_t next_pod = 0;
  for (size_t i = 0; i < s->n; i++) {
    encode_gpu(&s->gpus[i], &e.gpus[i], &e, i, &next_pod);
    e.gpu_ptrs[i] = &e.gpus[i];
  }
  m.n_gpus = s->n;
  m.gpus = s->n ? e.gpu_ptrs : NULL;
  m.engines_on = s->engines_on;
  m.engines_why = wire_str(s->engines_why);
  m.heartbeats = s->heartbeats;
  for (size_t i = 0, next_model = 0; i < ne; i++) {
    encode_engine(&s->engines[i], &e.engines[i]);
    encode_latency(&s->engines[i], &e.engines[i], &e.lats[i * ENGINE_LAT_FAMILIES],
                   &e.lat_ptrs[i * ENGINE_LAT_FAMILIES]);
    if (s->engines[i].n_models) {
      encode_models(&s->engines[i], &e.engines[i], &e.models[next_model],
                    &e.model_ptrs[next_model]);
      next_model += ENGINE_MAX_MODELS;
    }
    e.engine_ptrs[i] = &e.engines[i];
  }
  m.n_engines = ne;
  m.engines = ne ? e.engine_ptrs : NULL;
  int rc = 0;
  size_t n = protobuf_c_message_get_packed_size(&m.base);
  if (n > max) {
    rc = GS_ETOOBIG;
  } else {
    *out = malloc(n ? n : 1);
    if (!*out)
      rc = GS_ENOMEM;
    else
      *len = protobuf_c_message_pack(&m.base, *out);
  }
  enc_free(&e);
  return rc;
}

/* ---- decoding ---- */

static void copy_str(char *dst, size_t cap, const char *src) {
  size_t n = src ? strnlen(src, cap - 1) : 0;
  if (n)
    memcpy(dst, src, n);
  dst[n] = '\0';
}

/* The split of a decoded GPU: a known method with shares in [0, 1] that sum to at most 1 over
 * its distinct pods. Returns NULL or what is wrong. An unknown (newer) method reads as NONE, so
 * that the gateway falls back to the even split. */
static const char *decode_split(const Gpuscale__V1__GPU *m, struct gpu_pods *p) {
  switch (m->share_method) {
  case GPUSCALE__V1__SHARE_METHOD__SHARE_METHOD_EVEN: p->split = ATTRIB_SPLIT_EVEN; break;
  case GPUSCALE__V1__SHARE_METHOD__SHARE_METHOD_PROCESS: p->split = ATTRIB_SPLIT_PROCESS; break;
  default: p->split = ATTRIB_SPLIT_NONE; break;
  }
  p->holders = m->holders;
  if (p->split == ATTRIB_SPLIT_NONE) {
    for (size_t k = 0; k < p->n; k++)
      p->pods[k].share = 0;
    return NULL;
  }
  double sum = 0;
  for (size_t k = 0; k < p->n; k++) {
    double v = p->pods[k].share;
    if (!(v >= 0 && v <= 1)) /* also NaN */
      return "PodRef.share outside [0, 1]";
    bool seen = false;
    for (size_t j = 0; j < k && !seen; j++)
      seen =
          strcmp(p->pods[j].pod, p->pods[k].pod) == 0 && strcmp(p->pods[j].ns, p->pods[k].ns) == 0;
    if (!seen)
      sum += v;
  }
  if (sum > 1 + 1e-6)
    return "PodRef.share of one GPU's pods sums to more than 1";
  return NULL;
}

/* Decodes m into g. Zeroes g up to its listed pods (padding included, so that stored copies
 * compare with memcmp); the room of pods past the listed ones is left as it was. */
static const char *decode_gpu(const Gpuscale__V1__GPU *m, struct node_gpu *g) {
  size_t np = m->n_pods < ATTRIB_MAX_PODS ? m->n_pods : ATTRIB_MAX_PODS;
  memset(g, 0,
         offsetof(struct node_gpu, pods) + offsetof(struct gpu_pods, pods) +
             np * sizeof g->pods.pods[0]);
  g->info.index = m->index;
  copy_str(g->info.uuid, sizeof g->info.uuid, m->uuid);
  copy_str(g->info.name, sizeof g->info.name, m->name);
  copy_str(g->info.pci_bus_id, sizeof g->info.pci_bus_id, m->pci_bus_id);
  g->info.minor = m->minor;
  g->info.parent_index = -1;
  g->info.gi_id = -1;
  if (m->mig) {
    g->info.mig = true;
    g->info.parent_index = m->mig->parent_index;
    g->info.gi_id = m->mig->gpu_instance_id;
    copy_str(g->info.mig_profile, sizeof g->info.mig_profile, m->mig->profile);
  }
  switch (m->health) {
  case GPUSCALE__V1__HEALTH__HEALTH_OK: g->health = GPU_HEALTH_OK; break;
  case GPUSCALE__V1__HEALTH__HEALTH_LOST: g->health = GPU_HEALTH_LOST; break;
  default: g->health = GPU_HEALTH_ERROR; break; /* HEALTH_ERROR, or a value from a newer agent */
  }
  copy_str(g->reason, sizeof g->reason, m->reason);
  if (m->latest) {
    g->has_sample = true;
    g->latest.ts_ms = m->latest->timestamp_ms;
    for (size_t k = 0; k < NFIELDS; k++) {
      if (!(m->latest->valid & (UINT64_C(1) << field_map[k].bit)))
        continue;
      double v = *sample_slot((Gpuscale__V1__Sample *)m->latest, field_map[k].off);
      if (!isfinite(v)) { /* not a reading: the field counts as failed, never as a value */
        g->latest.failed |= GF_BIT(field_map[k].f);
        continue;
      }
      sample_set(&g->latest, field_map[k].f, v);
    }
    for (size_t k = 0; k < NFIELDS; k++) /* a bit in both: the reading wins */
      if ((m->latest->failed & (UINT64_C(1) << field_map[k].bit)) &&
          !sample_has(&g->latest, field_map[k].f))
        g->latest.failed |= GF_BIT(field_map[k].f);
    g->age_ms = m->age_ms;
  }
  g->fresh = m->fresh;
  for (size_t k = 0; k < np; k++) {
    const Gpuscale__V1__PodRef *p = m->pods[k];
    copy_str(g->pods.pods[k].ns, sizeof g->pods.pods[k].ns, p->namespace_);
    copy_str(g->pods.pods[k].pod, sizeof g->pods.pods[k].pod, p->pod);
    copy_str(g->pods.pods[k].container, sizeof g->pods.pods[k].container, p->container);
    g->pods.pods[k].share = p->share;
    g->pods.pods[k].group = p->group;
  }
  g->pods.n = np;
  g->pods.total = m->pods_total > m->n_pods ? m->pods_total : m->n_pods;
  g->pods.shared = m->shared;
  return decode_split(m, &g->pods);
}

/* The histogram of wire signal `bit` in m into h; false when there is none or it is not
 * well-formed (core/latency.h's contract): the signal is then absent, never 0. */
static bool decode_latency(const Gpuscale__V1__EnginePod *m, unsigned bit, struct latency_hist *h) {
  for (size_t i = 0; i < m->n_latency; i++) {
    const Gpuscale__V1__EngineLatency *l = m->latency[i];
    if ((unsigned)l->signal != bit)
      continue;
    if (l->n_le != l->n_count || l->n_le == 0 || l->n_le > LATENCY_MAX_BUCKETS)
      return false;
    h->n = (uint32_t)l->n_le;
    memcpy(h->le, l->le, l->n_le * sizeof *h->le);
    memcpy(h->cum, l->count, l->n_count * sizeof *h->cum);
    return latency_check(h, NULL, 0) == 0;
  }
  return false;
}

static void decode_engine(const Gpuscale__V1__EnginePod *m, struct engine_reading *r) {
  memset(r, 0, sizeof *r);
  copy_str(r->ns, sizeof r->ns, m->namespace_);
  copy_str(r->pod, sizeof r->pod, m->pod);
  r->kind = ENGINE_UNKNOWN; /* ENGINE_KIND_UNKNOWN, or a kind from a newer agent */
  for (size_t k = 0; k < sizeof kind_map / sizeof kind_map[0]; k++)
    if (kind_map[k].wire == (int)m->engine)
      r->kind = kind_map[k].k;
  r->ts_ms = m->timestamp_ms;
  r->fresh = m->fresh;
  copy_str(r->reason, sizeof r->reason, m->reason);
  /* A state from a newer agent: not serving, whatever it is (that agent did not read it). */
  r->state = (int)m->state >= 0 && (int)m->state < ENGINE_POD__COUNT
                 ? (enum engine_pod_state)m->state
                 : ENGINE_POD_NOT_READY;
  for (size_t k = 0; k < NSIGNALS; k++) { /* unknown (newer) bits are dropped */
    if (!(m->valid & (UINT64_C(1) << signal_map[k].bit)))
      continue;
    double v = *engine_slot((Gpuscale__V1__EnginePod *)m, signal_map[k].off);
    if (!isfinite(v)) { /* not a reading: absent, with a reason when the agent gave none */
      if (!r->reason[0])
        snprintf(r->reason, sizeof r->reason, "the agent sent %s as %g, not a finite number",
                 engine_signal_name(signal_map[k].s), v);
      continue;
    }
    int f = engine_signal_latency(signal_map[k].s);
    if (f >= 0 && !decode_latency(m, signal_map[k].bit, &r->lat[f])) {
      if (!r->reason[0])
        snprintf(r->reason, sizeof r->reason, "the agent sent %s without a well-formed histogram",
                 engine_signal_name(signal_map[k].s));
      continue;
    }
    r->v[signal_map[k].s] = v;
    r->valid |= ES_BIT(signal_map[k].s);
  }
  /* Models: the first ENGINE_MAX_MODELS whose name and version fit are kept, every one counted. */
  r->models_total = m->models_total > m->n_models ? m->models_total : (uint32_t)m->n_models;
  for (size_t i = 0; i < m->n_models && r->n_models < ENGINE_MAX_MODELS; i++) {
    const Gpuscale__V1__EngineModel *wm = m->models[i];
    const char *name = wm->name ? wm->name : "", *ver = wm->version ? wm->version : "";
    if (strlen(name) >= ENGINE_MODEL_NAME_LEN || strlen(ver) >= ENGINE_MODEL_VERSION_LEN)
      continue;
    struct engine_model *em = &r->models[r->n_models++];
    copy_str(em->name, sizeof em->name, name);
    copy_str(em->version, sizeof em->version, ver);
    for (size_t k = 0; k < sizeof model_map / sizeof *model_map; k++) {
      if (!(wm->valid & (UINT64_C(1) << signal_bit(model_map[k].s))))
        continue;
      double v = *model_slot((Gpuscale__V1__EngineModel *)wm, model_map[k].off);
      if (!isfinite(v))
        continue; /* not a reading: absent */
      em->v[model_map[k].s] = v;
      em->valid |= ES_BIT(model_map[k].s);
    }
  }
}

static int fail(const char **err, const char *msg, int rc) {
  if (err)
    *err = msg;
  return rc;
}

/* protobuf-c's allocations while unpacking come from the room's arena, bump-allocated and
 * reset per message; what does not fit comes from malloc and makes the arena grow for the next
 * message (up to ARENA_MAX). */
#define ARENA_MIN (64 * 1024)
#define ARENA_MAX (4 * 1024 * 1024)

static void *arena_alloc(void *ud, size_t n) {
  struct node_wire_room *r = ud;
  size_t need = (n + 15) & ~(size_t)15;
  if (need >= n && r->arena && need <= r->arena_cap - r->arena_used) {
    void *p = r->arena + r->arena_used;
    r->arena_used += need;
    return p;
  }
  r->arena_over += need;
  return malloc(n);
}

static void arena_free(void *ud, void *p) {
  struct node_wire_room *r = ud;
  if (!r->arena || (unsigned char *)p < r->arena || (unsigned char *)p >= r->arena + r->arena_cap)
    free(p);
}

/* Makes room for n GPUs and ne engine pods; new room is zeroed. */
static bool room_reserve(struct node_wire_room *r, size_t n, size_t ne) {
  if (n > r->gpus_cap) {
    struct node_gpu *g = calloc(n, sizeof *g);
    if (!g)
      return false;
    free(r->gpus);
    r->gpus = g;
    r->gpus_cap = n;
  }
  if (ne > r->engines_cap) {
    struct engine_reading *e = calloc(ne, sizeof *e);
    if (!e)
      return false;
    free(r->engines);
    r->engines = e;
    r->engines_cap = ne;
  }
  return true;
}

void node_wire_room_free(struct node_wire_room *r) {
  if (!r)
    return;
  free(r->gpus);
  free(r->engines);
  free(r->arena);
  memset(r, 0, sizeof *r);
}

int node_wire_decode_into(struct node_wire_room *room, const uint8_t *p, size_t len, size_t max,
                          struct node_snapshot *out, const char **err) {
  memset(out, 0, sizeof *out);
  if (err)
    *err = NULL;
  if (len > max)
    return fail(err, "NodeSnapshot over its size cap", GS_ETOOBIG);
  size_t want = room->arena_cap;
  if (want < ARENA_MIN)
    want = ARENA_MIN;
  while (want < room->arena_over + room->arena_cap && want < ARENA_MAX)
    want *= 2;
  if (want > room->arena_cap) {
    unsigned char *a = malloc(want);
    if (a) {
      free(room->arena);
      room->arena = a;
      room->arena_cap = want;
    }
  }
  room->arena_used = room->arena_over = 0;
  ProtobufCAllocator alloc = {arena_alloc, arena_free, room};
  Gpuscale__V1__NodeSnapshot *m =
      gpuscale__v1__node_snapshot__unpack(&alloc, len, len ? p : (const uint8_t *)"");
  if (!m)
    return fail(err, "not a valid gpuscale.v1.NodeSnapshot message", GS_EPARSE);
  int rc = 0;
  const char *bad = NULL;
  if (m->n_gpus > NODE_MAX_GPUS) {
    bad = "NodeSnapshot lists more than 256 GPUs";
    rc = GS_ETOOBIG;
  } else if (m->n_engines > ENGINE_MAX_PODS) {
    bad = "NodeSnapshot lists more than 256 engine pods";
    rc = GS_ETOOBIG;
  } else if (!room_reserve(room, m->n_gpus, m->n_engines)) {
    bad = "out of memory";
    rc = GS_ENOMEM;
  }
  for (size_t i = 0; !rc && i < m->n_gpus; i++) {
    bad = decode_gpu(m->gpus[i], &room->gpus[i]);
    if (bad)
      rc = GS_EPARSE;
  }
  if (rc) {
    gpuscale__v1__node_snapshot__free_unpacked(m, &alloc);
    return fail(err, bad, rc);
  }
  copy_str(out->node, sizeof out->node, m->node);
  copy_str(out->driver_version, sizeof out->driver_version, m->driver_version);
  out->interval_ms = m->interval_ms;
  out->generation = m->generation;
  out->taken_ms = m->taken_ms;
  out->attribution = m->attribution;
  out->n = m->n_gpus;
  out->gpus = m->n_gpus ? room->gpus : NULL;
  out->engines_on = m->engines_on; /* false from an agent before engines */
  out->heartbeats = m->heartbeats; /* false from an agent before 2026-12: a snapshot every pass */
  copy_str(out->engines_why, sizeof out->engines_why, m->engines_why);
  if (!out->engines_on && !out->engines_why[0])
    copy_str(out->engines_why, sizeof out->engines_why,
             "the agent reports no engine pods (a version before engine metrics)");
  for (size_t i = 0; i < m->n_engines; i++)
    decode_engine(m->engines[i], &room->engines[i]);
  out->n_engines = m->n_engines;
  out->engines = m->n_engines ? room->engines : NULL;
  gpuscale__v1__node_snapshot__free_unpacked(m, &alloc);
  return 0;
}

int node_wire_decode(const uint8_t *p, size_t len, size_t max, struct node_snapshot *out,
                     const char **err) {
  struct node_wire_room room;
  memset(&room, 0, sizeof room);
  int rc = node_wire_decode_into(&room, p, len, max, out, err);
  if (!rc) { /* the snapshot takes the room's arrays over (fresh: zeroed past what was decoded) */
    room.gpus = NULL;
    room.engines = NULL;
  }
  node_wire_room_free(&room);
  return rc;
}
