/* Per-step states of one GPU over the window (no utilisation reading, idle, busy), for gaps, idle
 * time and the idle streak: runs of equal states, appended as the steps are folded in time order,
 * each run a varint of (length << 2 | state); a GPU that stays busy, or idle, or away, for the
 * whole window holds a few bytes. Steps set out of order, or runs that would take more room than
 * two bits per step, switch the GPU to two bit arrays (what the analyser always kept before). */
#ifndef GS_RS_STEPS_H
#define GS_RS_STEPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { RS_STEP_NONE = 0, RS_STEP_IDLE = 1, RS_STEP_BUSY = 2 };

struct rs_steps {
  uint8_t *rle;  /* the closed runs */
  uint64_t *raw; /* instead: has (words), then busy (words) */
  uint32_t len, cap;
  uint32_t next; /* steps covered by the runs and the open run */
  uint32_t run;  /* the open run's length */
  uint8_t state; /* ... and state */
};

/* Step k (< n_steps) has a utilisation reading, busy or idle; a step set twice is busy when either
 * said so. Returns 0 or GS_ENOMEM (s is then as before). A zeroed struct is empty. */
int rs_steps_set(struct rs_steps *s, size_t n_steps, size_t k, bool busy);
/* Writes the two bit arrays (has, busy: (n_steps + 63) / 64 words each, zeroed here). */
void rs_steps_bits(const struct rs_steps *s, size_t n_steps, uint64_t *has, uint64_t *busy);
/* Bytes held (for the docs' cost model and tests). */
size_t rs_steps_bytes(const struct rs_steps *s, size_t n_steps);
void rs_steps_free(struct rs_steps *s);

#endif
