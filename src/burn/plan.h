/* What burn asks of the GPU over time (utilisation and memory from a pattern) and the duty-cycle
 * arithmetic that turns a utilisation into kernel lengths: pure functions, no CUDA. */
#ifndef GS_BURN_PLAN_H
#define GS_BURN_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/pattern.h"

#define BURN_MIB (1024.0 * 1024.0)

/* Parses a memory size: a number with B, KiB, MiB, GiB, TiB (powers of 1024), KB, MB, GB, TB
 * (powers of 1000), or PCT% of the GPU's memory. Sets exactly one of *bytes (whole bytes) and
 * *pct (0 < pct <= 100), the other to -1. Returns 0, or GS_EINVAL with err naming the value and
 * what is allowed. "0" is allowed (no memory). */
int burn_size_parse(const char *s, double *bytes, double *pct, char *err, size_t errlen);

/* Parses --steps "PCT:DURATION,PCT:DURATION,...,PCT" (each value held for its duration; the last
 * may omit it and then holds) into a PATTERN_STEPS pattern p (p->points owned: free()). With
 * repeat, every step needs a duration and the pattern loops over their sum. Values are 0..100.
 * Returns 0 or GS_EINVAL/GS_ENOMEM with err naming the bad item and what is allowed. */
int burn_steps_parse(const char *s, bool repeat, struct pattern *p, char *err, size_t errlen);

/* What follows the pattern. */
enum burn_follow { BURN_FOLLOW_UTIL = 0, BURN_FOLLOW_MEMORY, BURN_FOLLOW_BOTH };

/* The load asked for over time. level is in percent: it is the utilisation when utilisation
 * follows, and memory is mem_bytes x level / level's peak when memory follows (so memory peaks at
 * --memory). What does not follow holds util_pct or mem_bytes. */
struct burn_plan {
  struct pattern level;
  enum burn_follow follow;
  double util_pct;
  double mem_bytes;
};

/* Utilisation asked at t seconds, 0..100. */
double burn_plan_util(const struct burn_plan *p, double t);
/* Memory asked at t seconds, in bytes, rounded down to whole MiB (at least 0). */
uint64_t burn_plan_memory(const struct burn_plan *p, double t);

/* The duty cycle: kernels run for util% of every period. rate (iterations of the kernel per ms)
 * comes from calibration and follows every measured kernel; correction is the closed loop's
 * addition to the asked fraction. */
struct burn_duty {
  double period_ms;
  double rate;
  double correction;
};

/* The fraction of the period to keep a kernel running for util_pct: util/100 plus the
 * correction, within [0, 1]; 0 when util_pct <= 0 and 1 when util_pct >= 100. */
double burn_duty_fraction(const struct burn_duty *d, double util_pct);
/* Kernel iterations that run for on_ms at the current rate (at least 1 when on_ms > 0). */
uint64_t burn_duty_iterations(const struct burn_duty *d, double on_ms);
/* Folds one measured kernel (iterations that took ms of GPU time) into rate. */
void burn_duty_observe_kernel(struct burn_duty *d, uint64_t iterations, double ms);
/* Closed loop: folds one NVML reading into correction (integral action, bounded to [-1, 1]).
 * Readings taken while the target is 0 or 100 are ignored (nothing to correct there). */
void burn_duty_observe_nvml(struct burn_duty *d, double target_pct, double measured_pct);

/* Whether two PCI bus ids name the same device: CUDA writes "0000:07:00.0", NVML
 * "00000000:07:00.0"; compared as numbers (domain, bus, device, function). */
bool burn_pci_same(const char *a, const char *b);

#endif
