/* The CUDA driver API, loaded at run time with dlopen("libcuda.so.1"): our own declarations, so
 * that building needs no CUDA toolkit. Only `gpuscale burn` uses this module; the agent never
 * loads libcuda. */
#ifndef GS_BURN_CUDA_H
#define GS_BURN_CUDA_H

#include <stddef.h>

/* CUresult values burn tells apart (cuda.h's CUDA_ERROR_*). */
enum {
  CU_OK = 0,
  CU_ERR_INVALID_VALUE = 1,
  CU_ERR_OUT_OF_MEMORY = 2,
  CU_ERR_NOT_INITIALIZED = 3,
  CU_ERR_DEINITIALIZED = 4,
  CU_ERR_STUB_LIBRARY = 34,
  CU_ERR_DEVICE_UNAVAILABLE = 46,
  CU_ERR_NO_DEVICE = 100,
  CU_ERR_INVALID_DEVICE = 101,
  CU_ERR_NOT_READY = 600,
  CU_ERR_SYSTEM_DRIVER_MISMATCH = 803,
  CU_ERR_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804,
};

enum {
  CU_CTX_SCHED_BLOCKING_SYNC = 0x04, /* the host sleeps while it waits for the GPU */
  CU_EVENT_BLOCKING_SYNC = 0x01,     /* likewise for cuEventSynchronize */
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
};

typedef unsigned long long cu_deviceptr; /* CUdeviceptr (64-bit, the _v2 ABI) */
typedef int cu_device;                   /* CUdevice */
struct cu_ctx;                           /* CUcontext is struct CUctx_st *: opaque here */
struct cu_module;
struct cu_function;
struct cu_event;
struct cu_stream;

/* Entry points, resolved by their exported names (cuda.h maps cuCtxCreate to cuCtxCreate_v2 and
 * so on; the unsuffixed names of those are the old 32-bit ABI). */
struct cuda_api {
  void *lib;
  int (*Init)(unsigned flags);
  int (*DriverGetVersion)(int *v);
  int (*GetErrorName)(int rc, const char **s);
  int (*GetErrorString)(int rc, const char **s);
  int (*DeviceGetCount)(int *n);
  int (*DeviceGet)(cu_device *d, int ordinal);
  int (*DeviceGetName)(char *name, int len, cu_device d);
  int (*DeviceTotalMem)(size_t *bytes, cu_device d);
  int (*DeviceGetAttribute)(int *v, int attr, cu_device d);
  int (*DeviceGetPCIBusId)(char *buf, int len, cu_device d);
  int (*CtxCreate)(struct cu_ctx **ctx, unsigned flags, cu_device d);
  int (*CtxDestroy)(struct cu_ctx *ctx);
  int (*CtxSynchronize)(void);
  int (*MemGetInfo)(size_t *free_bytes, size_t *total);
  int (*MemAlloc)(cu_deviceptr *p, size_t bytes);
  int (*MemFree)(cu_deviceptr p);
  int (*MemsetD8)(cu_deviceptr p, unsigned char v, size_t n);
  int (*ModuleLoadData)(struct cu_module **m, const void *image);
  int (*ModuleUnload)(struct cu_module *m);
  int (*ModuleGetFunction)(struct cu_function **f, struct cu_module *m, const char *name);
  int (*LaunchKernel)(struct cu_function *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                      unsigned by, unsigned bz, unsigned shmem, struct cu_stream *stream,
                      void **params, void **extra);
  int (*EventCreate)(struct cu_event **e, unsigned flags);
  int (*EventRecord)(struct cu_event *e, struct cu_stream *stream);
  int (*EventSynchronize)(struct cu_event *e);
  int (*EventElapsedTime)(float *ms, struct cu_event *start, struct cu_event *end);
  int (*EventDestroy)(struct cu_event *e);
};

/* Loads path (NULL: libcuda.so.1, then libcuda.so) and resolves every entry point. Returns 0, or
 * GS_EUNAVAIL with err saying what is missing (no driver, or a symbol the driver lacks). */
int cuda_load(struct cuda_api *api, const char *path, char *err, size_t errlen);
/* dlcloses the library. cuda_unload on an unloaded api is fine. */
void cuda_unload(struct cuda_api *api);
/* Writes "CUDA_ERROR_NAME (text)" for rc into buf and returns buf. */
const char *cuda_strerror(const struct cuda_api *api, int rc, char *buf, size_t len);

#endif
