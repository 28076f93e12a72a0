/* Test fixture shared by the device-id and attribution tests: a gpu_info list as the nvml collector
 * builds it (whole GPUs first in NVML order, then MIG instances). */
#ifndef GS_TEST_DEVS_H
#define GS_TEST_DEVS_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "core/sample.h"

#define UA "GPU-aaaaaaaa-0000-4000-8000-000000000000"
#define UB "GPU-bbbbbbbb-0000-4000-8000-000000000000"
#define UC "GPU-cccccccc-0000-4000-8000-000000000000"
#define UD "GPU-dddddddd-0000-4000-8000-000000000000"
#define M1 "MIG-11111111-0000-4000-8000-000000000000"
#define M2 "MIG-22222222-0000-4000-8000-000000000000"

/* Fills devs[i]: uuid, minor (/dev/nvidiaN), and for a MIG instance its parent index and GPU
 * instance id (-1 otherwise). */
static inline void test_set_dev(struct gpu_info *devs, int i, const char *uuid, int minor, bool mig,
                                int parent, int gi) {
  memset(&devs[i], 0, sizeof devs[i]);
  devs[i].index = i;
  snprintf(devs[i].uuid, sizeof devs[i].uuid, "%s", uuid);
  devs[i].minor = minor;
  devs[i].mig = mig;
  devs[i].parent_index = parent;
  devs[i].gi_id = gi;
}

#endif
