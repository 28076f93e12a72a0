/* Clocks and duration parsing ("500ms", "1s", "10m", "2h", "1m30s"). */
#ifndef GS_TIMEUTIL_H
#define GS_TIMEUTIL_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* Monotonic milliseconds, for intervals and staleness. */
int64_t time_mono_ms(void);
/* The CLOCK_MONOTONIC time ms from now, for pthread_cond_timedwait on a condition variable made
 * by cond_init_mono (a wall-clock step then neither cuts nor stretches the wait). */
struct timespec time_mono_deadline(int64_t ms);
/* pthread_cond_init with CLOCK_MONOTONIC: timed waits take time_mono_deadline's deadlines. */
int cond_init_mono(pthread_cond_t *cond);
/* Wall-clock milliseconds since the epoch, for sample timestamps shown to users. */
int64_t time_wall_ms(void);
/* Parses a Go-style duration into milliseconds. Returns 0, or GS_EINVAL for an empty,
 * malformed, negative, zero or overflowing value (zero is never a valid duration here). */
int duration_parse_ms(const char *s, int64_t *out_ms);
/* Formats ms as the shortest Go-style duration ("1s", "10m", "1m30s", "250ms") into buf. */
void duration_format(int64_t ms, char *buf, unsigned len);

#endif
