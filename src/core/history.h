/* Per-GPU rings of timestamped samples covering --history, shared by the sampler and all readers.
 */
#ifndef GS_HISTORY_H
#define GS_HISTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/sample.h"

struct history;

/* What a reader gets for one device: copied under the lock, so it can be used without it. */
struct gpu_snapshot {
  struct gpu_info info;
  enum gpu_health health;
  char reason[128]; /* last error text when health != OK, else empty */
  bool has_sample;  /* false until the first good read */
  struct gpu_sample latest;
};

/* Creates rings holding `capacity` samples per device (>= 1). Returns NULL on ENOMEM. */
struct history *history_new(size_t capacity);
void history_free(struct history *h);
/* Replaces the device list (after open or a reload). Rings of devices whose uuid is kept
 * survive; others start empty. Returns 0 or GS_ENOMEM (old list kept). */
int history_set_devices(struct history *h, const struct gpu_info *infos, size_t n);
size_t history_count(struct history *h);
/* Appends a good sample for device i and marks it healthy. */
void history_push(struct history *h, size_t i, const struct gpu_sample *s);
/* Records that reading device i failed (health ERROR or LOST) with a short reason. */
void history_set_health(struct history *h, size_t i, enum gpu_health health, const char *reason);
/* Marks the end of one sampling pass over all devices and wakes history_wait_tick(). */
void history_tick(struct history *h);
/* Number of completed passes so far. */
uint64_t history_generation(struct history *h);
/* Waits until the generation passes `seen` or timeout_ms elapses; returns the generation. */
uint64_t history_wait_tick(struct history *h, uint64_t seen, int timeout_ms);
/* Wakes every waiter at once (shutdown). */
void history_wake_all(struct history *h);
/* Copies up to cap device snapshots into out; *n gets the device count. Returns 0. */
int history_snapshot(struct history *h, struct gpu_snapshot *out, size_t cap, size_t *n);
/* Copies one device's snapshot. Returns 0 or GS_ENOTFOUND. */
int history_get(struct history *h, size_t i, struct gpu_snapshot *out);
/* Mean of field f over device i's samples with mono_ms >= since_mono_ms. Returns 0, or
 * GS_EUNAVAIL when no sample in the window has the field (*nsamples = 0). */
int history_window_mean(struct history *h, size_t i, enum gpu_field f, int64_t since_mono_ms,
                        double *out, size_t *nsamples);
/* Number of samples currently stored for device i (for tests and /api). */
size_t history_len(struct history *h, size_t i);

#endif
