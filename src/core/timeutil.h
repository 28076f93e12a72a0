/* Clocks and duration parsing ("500ms", "1s", "10m", "2h", "1m30s"). */
#ifndef GS_TIMEUTIL_H
#define GS_TIMEUTIL_H

#include <stdint.h>

/* Monotonic milliseconds, for intervals and staleness. */
int64_t time_mono_ms(void);
/* Wall-clock milliseconds since the epoch, for sample timestamps shown to users. */
int64_t time_wall_ms(void);
/* Parses a Go-style duration into milliseconds. Returns 0, or GS_EINVAL for an empty,
 * malformed, negative, zero or overflowing value (zero is never a valid duration here). */
int duration_parse_ms(const char *s, int64_t *out_ms);
/* Formats ms as the shortest Go-style duration ("1s", "10m", "1m30s", "250ms") into buf. */
void duration_format(int64_t ms, char *buf, unsigned len);

#endif
