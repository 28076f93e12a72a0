/* Process-wide gRPC C-core init and shutdown, so that main.c never includes <grpc/grpc.h>. */
#include "rpc/rpc.h"

#include <grpc/grpc.h>

/* Abseil built without NDEBUG (Debian's packages are: CMAKE_BUILD_TYPE=None) checks every
 * absl::Mutex lock for lock-order cycles in a global graph, and gRPC C-core locks one for nearly
 * everything: about 7 % of the gateway's CPU with 2 000 agents (issue 24, perf). A release build
 * of abseil has it off; absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore) turns
 * it off in the others. It is C++ (mangled, in abseil's versioned inline namespace), so it is
 * declared weak under the names of the abseil builds we link with: absent, nothing is done. */
#define GS_ABSL_SET_DEADLOCK(ns)                                                                   \
  "_ZN4absl" ns "29SetMutexDeadlockDetectionModeENS0_15OnDeadlockCycleE"
extern void gs_absl_deadlock_debian3(int mode) __asm__(GS_ABSL_SET_DEADLOCK("7debian3"))
    __attribute__((weak));
extern void gs_absl_deadlock_lts20230802(int mode) __asm__(GS_ABSL_SET_DEADLOCK("12lts_20230802"))
    __attribute__((weak));
extern void gs_absl_deadlock_lts20240722(int mode) __asm__(GS_ABSL_SET_DEADLOCK("12lts_20240722"))
    __attribute__((weak));

void rpc_global_init(void) {
  const int ignore = 0; /* absl::OnDeadlockCycle::kIgnore */
  if (gs_absl_deadlock_debian3)
    gs_absl_deadlock_debian3(ignore);
  if (gs_absl_deadlock_lts20230802)
    gs_absl_deadlock_lts20230802(ignore);
  if (gs_absl_deadlock_lts20240722)
    gs_absl_deadlock_lts20240722(ignore);
  grpc_init();
}

void rpc_global_shutdown(void) {
  grpc_shutdown();
}
