/* One GPU under burn: its CUDA context, the kernel, the memory held, and timed kernel runs. */
#ifndef GS_BURN_GPU_H
#define GS_BURN_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "burn/cuda.h"

#define BURN_GPU_CHUNK (256ull << 20) /* memory is held in chunks of at most 256 MiB */

struct burn_gpu {
  struct cuda_api api;
  cu_device dev;
  struct cu_ctx *ctx;
  struct cu_module *mod;
  struct cu_function *fn;
  struct cu_event *ev_start, *ev_end;
  cu_deviceptr out; /* one float per kernel thread */
  unsigned grid, block;
  cu_deviceptr *chunk;
  uint64_t *chunk_bytes;
  size_t nchunks, cap;
  uint64_t held;        /* bytes in chunks */
  uint64_t total_bytes; /* the GPU's memory */
  char name[96];
  char pci[32]; /* cuDeviceGetPCIBusId, "" when it failed */
};

/* Loads libcuda (lib, or NULL for libcuda.so.1), creates a context on GPU ordinal and loads the
 * kernel. Returns BURN_EXIT_OK, or another burn_exit status with err saying what failed; g is
 * then already closed. */
int burn_gpu_open(struct burn_gpu *g, const char *lib, int ordinal, char *err, size_t errlen);
/* Allocates or frees chunks until exactly target bytes are held, touching new memory with
 * cuMemsetD8. Returns BURN_EXIT_OK, or BURN_EXIT_NO_MEMORY / BURN_EXIT_KERNEL / BURN_EXIT_ERROR
 * with err set (what is held stays held; burn_gpu_close frees it). */
int burn_gpu_memory(struct burn_gpu *g, uint64_t target, char *err, size_t errlen);
/* Runs the kernel for iterations and waits for it. *ms gets its GPU time (events). Returns
 * BURN_EXIT_OK, or BURN_EXIT_KERNEL / BURN_EXIT_ERROR with err set. */
int burn_gpu_run(struct burn_gpu *g, uint64_t iterations, double *ms, char *err, size_t errlen);
/* Calibrates: runs growing kernels until one lasts at least target_ms and returns its rate
 * (iterations per ms) in *rate and the kernels it ran in *kernels. Same returns as
 * burn_gpu_run. */
int burn_gpu_calibrate(struct burn_gpu *g, double target_ms, double *rate, unsigned *kernels,
                       char *err, size_t errlen);
/* Frees the memory, the kernel, the events and the context, and unloads libcuda. Logs (does not
 * return) failures: destroying the context releases whatever a failed free left. Safe to call
 * twice and on a zeroed g. */
void burn_gpu_close(struct burn_gpu *g);

#endif
