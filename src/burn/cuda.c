/* Loads the CUDA driver library with dlopen and resolves the entry points burn needs. */
#include "burn/cuda.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "core/err.h"

_Static_assert(sizeof(int (*)(void)) == sizeof(void *), "function pointers fit in dlsym's void *");

#define CUDA_HINT                                                                                  \
  "is the NVIDIA driver installed, and is libcuda.so.1 on the library path or mounted into the "   \
  "container (NVIDIA container toolkit, NVIDIA_DRIVER_CAPABILITIES=compute,utility)?"

static int open_lib(struct cuda_api *api, const char *path, char *err, size_t errlen) {
  if (path && *path) {
    api->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!api->lib) {
      const char *e = dlerror();
      snprintf(err, errlen, "cannot load the CUDA driver library %s: %s; check --cuda-library",
               path, e ? e : "unknown dlopen error");
      return GS_EUNAVAIL;
    }
    return 0;
  }
  api->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (api->lib)
    return 0;
  char first[256];
  const char *e = dlerror();
  snprintf(first, sizeof first, "%s", e ? e : "unknown dlopen error");
  api->lib = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
  if (api->lib)
    return 0;
  (void)dlerror();
  snprintf(err, errlen, "cannot load the CUDA driver (libcuda.so.1, then libcuda.so): %s; %s",
           first, CUDA_HINT);
  return GS_EUNAVAIL;
}

int cuda_load(struct cuda_api *api, const char *path, char *err, size_t errlen) {
  memset(api, 0, sizeof *api);
  int rc = open_lib(api, path, err, errlen);
  if (rc)
    return rc;
  /* dlsym returns void *; each result is copied into its typed pointer (same size on every
   * platform POSIX dlsym supports). */
  struct {
    const char *name, *fallback;
    void *slot;
  } syms[] = {
      {"cuInit", NULL, &api->Init},
      {"cuDriverGetVersion", NULL, &api->DriverGetVersion},
      {"cuGetErrorName", NULL, &api->GetErrorName},
      {"cuGetErrorString", NULL, &api->GetErrorString},
      {"cuDeviceGetCount", NULL, &api->DeviceGetCount},
      {"cuDeviceGet", NULL, &api->DeviceGet},
      {"cuDeviceGetName", NULL, &api->DeviceGetName},
      {"cuDeviceTotalMem_v2", NULL, &api->DeviceTotalMem},
      {"cuDeviceGetAttribute", NULL, &api->DeviceGetAttribute},
      {"cuDeviceGetPCIBusId", NULL, &api->DeviceGetPCIBusId},
      {"cuCtxCreate_v2", NULL, &api->CtxCreate},
      {"cuCtxDestroy_v2", NULL, &api->CtxDestroy},
      {"cuCtxSynchronize", NULL, &api->CtxSynchronize},
      {"cuMemGetInfo_v2", NULL, &api->MemGetInfo},
      {"cuMemAlloc_v2", NULL, &api->MemAlloc},
      {"cuMemFree_v2", NULL, &api->MemFree},
      {"cuMemsetD8_v2", NULL, &api->MemsetD8},
      {"cuModuleLoadData", NULL, &api->ModuleLoadData},
      {"cuModuleUnload", NULL, &api->ModuleUnload},
      {"cuModuleGetFunction", NULL, &api->ModuleGetFunction},
      {"cuLaunchKernel", NULL, &api->LaunchKernel},
      {"cuEventCreate", NULL, &api->EventCreate},
      {"cuEventRecord", NULL, &api->EventRecord},
      {"cuEventSynchronize", NULL, &api->EventSynchronize},
      /* CUDA 12.8+ headers map cuEventElapsedTime to _v2 (same arguments); older drivers have
       * only the first. */
      {"cuEventElapsedTime_v2", "cuEventElapsedTime", &api->EventElapsedTime},
      {"cuEventDestroy_v2", NULL, &api->EventDestroy},
  };
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    (void)dlerror();
    void *p = dlsym(api->lib, syms[i].name);
    if (!p && syms[i].fallback)
      p = dlsym(api->lib, syms[i].fallback);
    if (!p) {
      snprintf(err, errlen,
               "the CUDA driver library lacks %s; the NVIDIA driver is too old or the library is "
               "not libcuda",
               syms[i].name);
      cuda_unload(api);
      return GS_EUNAVAIL;
    }
    memcpy(syms[i].slot, &p, sizeof p);
  }
  return 0;
}

void cuda_unload(struct cuda_api *api) {
  if (api->lib)
    dlclose(api->lib);
  memset(api, 0, sizeof *api);
}

const char *cuda_strerror(const struct cuda_api *api, int rc, char *buf, size_t len) {
  const char *name = NULL, *text = NULL;
  if (api->GetErrorName && api->GetErrorName(rc, &name) != CU_OK)
    name = NULL;
  if (api->GetErrorString && api->GetErrorString(rc, &text) != CU_OK)
    text = NULL;
  if (name && text)
    snprintf(buf, len, "%s (%s)", name, text);
  else if (name)
    snprintf(buf, len, "%s", name);
  else
    snprintf(buf, len, "CUDA error %d", rc);
  return buf;
}
