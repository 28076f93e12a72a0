/* One GPU under burn: context, kernel, memory chunks and timed kernel runs, each CUDA failure
 * mapped to burn's exit status with a message that says what to do. */
#include "burn/gpu.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "burn/burn.h"
#include "burn/spin_ptx.h"
#include "core/log.h"

#define BLOCK_THREADS 256
#define BLOCKS_PER_SM 2
#define CALIBRATE_MAX_ROUNDS 40

__attribute__((format(printf, 6, 7))) static int
fail(struct burn_gpu *g, int status, int rc, char *err, size_t errlen, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (rc) {
    char e[160];
    snprintf(err, errlen, "%s: %s", msg, cuda_strerror(&g->api, rc, e, sizeof e));
  } else {
    snprintf(err, errlen, "%s", msg);
  }
  return status;
}

static int open_device(struct burn_gpu *g, int ordinal, char *err, size_t errlen) {
  struct cuda_api *a = &g->api;
  int rc = a->Init(0);
  if (rc == CU_ERR_NO_DEVICE)
    return fail(g, BURN_EXIT_NO_GPU, rc, err, errlen,
                "no CUDA GPU is visible (in a pod: request nvidia.com/gpu; check "
                "CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES); cuInit");
  if (rc)
    return fail(g, BURN_EXIT_NO_DRIVER, rc, err, errlen,
                "the CUDA driver did not initialise (driver and library versions must match; "
                "a toolkit stub libcuda is not a driver); cuInit");
  int n = 0;
  if ((rc = a->DeviceGetCount(&n)))
    return fail(g, BURN_EXIT_ERROR, rc, err, errlen, "cuDeviceGetCount");
  if (n <= 0)
    return fail(g, BURN_EXIT_NO_GPU, 0, err, errlen, "no CUDA GPU is visible");
  if (ordinal >= n)
    return fail(g, BURN_EXIT_NO_GPU, 0, err, errlen,
                "--gpu %d: no such GPU; CUDA sees %d GPU%s (--gpu 0..%d)", ordinal, n,
                n == 1 ? "" : "s", n - 1);
  if ((rc = a->DeviceGet(&g->dev, ordinal)))
    return fail(g, rc == CU_ERR_INVALID_DEVICE ? BURN_EXIT_NO_GPU : BURN_EXIT_ERROR, rc, err,
                errlen, "--gpu %d: cuDeviceGet", ordinal);
  if ((rc = a->DeviceGetName(g->name, (int)sizeof g->name, g->dev)))
    return fail(g, BURN_EXIT_ERROR, rc, err, errlen, "cuDeviceGetName");
  g->name[sizeof g->name - 1] = '\0';
  size_t total = 0;
  if ((rc = a->DeviceTotalMem(&total, g->dev)))
    return fail(g, BURN_EXIT_ERROR, rc, err, errlen, "cuDeviceTotalMem_v2");
  g->total_bytes = total;
  int sms = 0;
  if ((rc = a->DeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, g->dev)))
    return fail(g, BURN_EXIT_ERROR, rc, err, errlen, "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)");
  if (sms < 1 || sms > 100000)
    return fail(g, BURN_EXIT_ERROR, 0, err, errlen, "the driver reports %d multiprocessors", sms);
  g->grid = (unsigned)sms * BLOCKS_PER_SM;
  g->block = BLOCK_THREADS;
  if ((rc = a->DeviceGetPCIBusId(g->pci, (int)sizeof g->pci, g->dev))) {
    char e[160];
    LOG_WARN("burn", "cuDeviceGetPCIBusId: %s; NVML readings cannot be matched to this GPU",
             cuda_strerror(a, rc, e, sizeof e));
    g->pci[0] = '\0';
  }
  g->pci[sizeof g->pci - 1] = '\0';
  return BURN_EXIT_OK;
}

static int open_context(struct burn_gpu *g, char *err, size_t errlen) {
  struct cuda_api *a = &g->api;
  /* Blocking sync: the host sleeps while a kernel runs instead of spinning a CPU core. */
  int rc = a->CtxCreate(&g->ctx, CU_CTX_SCHED_BLOCKING_SYNC, g->dev);
  if (rc) {
    g->ctx = NULL;
    if (rc == CU_ERR_OUT_OF_MEMORY)
      return fail(g, BURN_EXIT_NO_MEMORY, rc, err, errlen,
                  "no GPU memory left for a CUDA context; cuCtxCreate_v2");
    if (rc == CU_ERR_DEVICE_UNAVAILABLE || rc == CU_ERR_INVALID_DEVICE)
      return fail(g, BURN_EXIT_NO_GPU, rc, err, errlen,
                  "the GPU is unavailable (another process holds it in exclusive-process compute "
                  "mode?); cuCtxCreate_v2");
    return fail(g, BURN_EXIT_ERROR, rc, err, errlen, "cuCtxCreate_v2");
  }
  if ((rc = a->ModuleLoadData(&g->mod, burn_spin_ptx))) {
    g->mod = NULL;
    return fail(g, BURN_EXIT_KERNEL, rc, err, errlen,
                "the driver did not load the burn kernel (PTX ISA 6.3, sm_60: needs a driver for "
                "CUDA 10.0 or later); cuModuleLoadData");
  }
  if ((rc = a->ModuleGetFunction(&g->fn, g->mod, "gs_burn")))
    return fail(g, BURN_EXIT_KERNEL, rc, err, errlen, "cuModuleGetFunction(gs_burn)");
  if ((rc = a->EventCreate(&g->ev_start, 0))) {
    g->ev_start = NULL;
    return fail(g, BURN_EXIT_ERROR, rc, err, errlen, "cuEventCreate");
  }
  if ((rc = a->EventCreate(&g->ev_end, CU_EVENT_BLOCKING_SYNC))) {
    g->ev_end = NULL;
    return fail(g, BURN_EXIT_ERROR, rc, err, errlen, "cuEventCreate");
  }
  size_t out_bytes = (size_t)g->grid * g->block * sizeof(float);
  if ((rc = a->MemAlloc(&g->out, out_bytes))) {
    g->out = 0;
    return fail(g, rc == CU_ERR_OUT_OF_MEMORY ? BURN_EXIT_NO_MEMORY : BURN_EXIT_ERROR, rc, err,
                errlen, "cuMemAlloc_v2 of the kernel's %zu-byte output", out_bytes);
  }
  return BURN_EXIT_OK;
}

int burn_gpu_open(struct burn_gpu *g, const char *lib, int ordinal, char *err, size_t errlen) {
  memset(g, 0, sizeof *g);
  if (cuda_load(&g->api, lib, err, errlen) != 0)
    return BURN_EXIT_NO_DRIVER;
  int st = open_device(g, ordinal, err, errlen);
  if (st == BURN_EXIT_OK)
    st = open_context(g, err, errlen);
  if (st != BURN_EXIT_OK)
    burn_gpu_close(g);
  return st;
}

static int grow(struct burn_gpu *g) {
  if (g->nchunks < g->cap)
    return 0;
  size_t ncap = g->cap ? g->cap * 2 : 64;
  cu_deviceptr *c = realloc(g->chunk, ncap * sizeof *c);
  if (!c)
    return -1;
  g->chunk = c;
  uint64_t *b = realloc(g->chunk_bytes, ncap * sizeof *b);
  if (!b)
    return -1;
  g->chunk_bytes = b;
  g->cap = ncap;
  return 0;
}

int burn_gpu_memory(struct burn_gpu *g, uint64_t target, char *err, size_t errlen) {
  struct cuda_api *a = &g->api;
  int rc;
  while (g->held > target) { /* free from the newest chunk */
    size_t i = g->nchunks - 1;
    if ((rc = a->MemFree(g->chunk[i])))
      return fail(g, BURN_EXIT_ERROR, rc, err, errlen, "cuMemFree_v2");
    g->held -= g->chunk_bytes[i];
    g->nchunks--;
  }
  while (g->held < target) {
    uint64_t want = target - g->held;
    if (want > BURN_GPU_CHUNK)
      want = BURN_GPU_CHUNK;
    if (grow(g))
      return fail(g, BURN_EXIT_ERROR, 0, err, errlen, "out of host memory");
    cu_deviceptr p = 0;
    if ((rc = a->MemAlloc(&p, (size_t)want))) {
      if (rc != CU_ERR_OUT_OF_MEMORY)
        return fail(g, BURN_EXIT_ERROR, rc, err, errlen, "cuMemAlloc_v2 of %llu bytes",
                    (unsigned long long)want);
      size_t fr = 0, tot = 0;
      char have[96] = "";
      if (a->MemGetInfo(&fr, &tot) == CU_OK)
        snprintf(have, sizeof have, "; the GPU has %.0f MiB, %.0f MiB free", (double)tot / 1048576,
                 (double)fr / 1048576);
      return fail(g, BURN_EXIT_NO_MEMORY, rc, err, errlen,
                  "out of GPU memory: holding %.0f MiB of the %.0f MiB asked%s (other processes "
                  "and the CUDA context use memory too); cuMemAlloc_v2",
                  (double)g->held / 1048576, (double)target / 1048576, have);
    }
    g->chunk[g->nchunks] = p;
    g->chunk_bytes[g->nchunks] = want;
    g->nchunks++;
    g->held += want;
    /* Touch every byte, so that the memory is resident and counted as used. */
    if ((rc = a->MemsetD8(p, 0xA5, (size_t)want)))
      return fail(g, BURN_EXIT_ERROR, rc, err, errlen, "cuMemsetD8_v2");
  }
  return BURN_EXIT_OK;
}

int burn_gpu_run(struct burn_gpu *g, uint64_t iterations, double *ms, char *err, size_t errlen) {
  struct cuda_api *a = &g->api;
  unsigned long long iters = iterations;
  void *params[2] = {&g->out, &iters};
  int rc;
  if ((rc = a->EventRecord(g->ev_start, NULL)))
    return fail(g, BURN_EXIT_ERROR, rc, err, errlen, "cuEventRecord");
  if ((rc = a->LaunchKernel(g->fn, g->grid, 1, 1, g->block, 1, 1, 0, NULL, params, NULL)))
    return fail(g, BURN_EXIT_KERNEL, rc, err, errlen,
                "the burn kernel did not launch (%u blocks of %u threads); cuLaunchKernel", g->grid,
                g->block);
  if ((rc = a->EventRecord(g->ev_end, NULL)))
    return fail(g, BURN_EXIT_ERROR, rc, err, errlen, "cuEventRecord");
  if ((rc = a->EventSynchronize(g->ev_end)))
    return fail(g, BURN_EXIT_KERNEL, rc, err, errlen, "the burn kernel failed; cuEventSynchronize");
  float f = 0;
  if ((rc = a->EventElapsedTime(&f, g->ev_start, g->ev_end)))
    return fail(g, BURN_EXIT_ERROR, rc, err, errlen, "cuEventElapsedTime");
  *ms = f;
  return BURN_EXIT_OK;
}

int burn_gpu_calibrate(struct burn_gpu *g, double target_ms, double *rate, unsigned *kernels,
                       char *err, size_t errlen) {
  uint64_t iters = 1000;
  *kernels = 0;
  for (int round = 0; round < CALIBRATE_MAX_ROUNDS; round++) {
    double ms = 0;
    int st = burn_gpu_run(g, iters, &ms, err, errlen);
    if (st != BURN_EXIT_OK)
      return st;
    (*kernels)++;
    if (ms >= target_ms) {
      *rate = (double)iters / ms;
      return BURN_EXIT_OK;
    }
    /* Aim straight at the target once the kernel is long enough to measure. */
    uint64_t next = ms > 1.0 ? (uint64_t)((double)iters * target_ms / ms * 1.1) : iters * 4;
    iters = next > iters ? next : iters * 2;
  }
  return fail(g, BURN_EXIT_KERNEL, 0, err, errlen,
              "calibration: the kernel never ran for %.0f ms (the GPU reports no kernel time)",
              target_ms);
}

void burn_gpu_close(struct burn_gpu *g) {
  struct cuda_api *a = &g->api;
  char e[160];
  int rc;
  if (g->ctx) {
    if ((rc = a->CtxSynchronize()))
      LOG_DEBUG("burn", "cuCtxSynchronize at exit: %s", cuda_strerror(a, rc, e, sizeof e));
    for (size_t i = g->nchunks; i-- > 0;)
      if ((rc = a->MemFree(g->chunk[i])))
        LOG_DEBUG("burn", "cuMemFree_v2 at exit: %s (the context's destruction frees it)",
                  cuda_strerror(a, rc, e, sizeof e));
    if (g->out && (rc = a->MemFree(g->out)))
      LOG_DEBUG("burn", "cuMemFree_v2 at exit: %s", cuda_strerror(a, rc, e, sizeof e));
    if (g->ev_start)
      (void)a->EventDestroy(g->ev_start);
    if (g->ev_end)
      (void)a->EventDestroy(g->ev_end);
    if (g->mod)
      (void)a->ModuleUnload(g->mod);
    if ((rc = a->CtxDestroy(g->ctx)))
      LOG_ERROR("burn", "cuCtxDestroy_v2: %s; the driver frees the GPU when this process exits",
                cuda_strerror(a, rc, e, sizeof e));
  }
  free(g->chunk);
  free(g->chunk_bytes);
  cuda_unload(a);
  memset(g, 0, sizeof *g);
}
