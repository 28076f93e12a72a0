/* What the library-backed collectors (nvml.c, rocm.c) do alike, whatever the library: error
 * counters by call and code, open() failures with a hint, the bookkeeping of a sample (bounds,
 * the interval, a device out of service and its identification retries, a failed field call,
 * nothing answering). Each backend keeps its own calls, types and messages. Not for use outside
 * src/collect/. */
#ifndef GPUSCALE_COLLECT_BACKEND_COMMON_H
#define GPUSCALE_COLLECT_BACKEND_COMMON_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collect/collector.h"
#include "core/log.h"

/* How a library's return codes are counted: names[rc] for a named code (NULL holes allowed), the
 * library's catch-all code as unknown_name, any other as "OTHER". Slots: a named code's own
 * number, nnamed for the catch-all, nnamed + 1 for OTHER (so nnamed + 2 slots in all). */
struct backend_codes {
  const char *const *names;
  size_t nnamed;
  int64_t unknown;
  const char *unknown_name;
};

/* The counter slot of code rc, and a slot's name (static). */
size_t backend_code_slot(const struct backend_codes *c, int64_t rc);
const char *backend_slot_name(const struct backend_codes *c, size_t slot);

/* The errors op over a counter table errors[ncalls][nslots] (row after row): writes up to cap
 * non-zero counters to out and returns how many there are. */
size_t backend_errors(const atomic_uint_fast64_t *errors, size_t ncalls, size_t nslots,
                      const char *const *call_names, const struct backend_codes *codes,
                      struct collector_error_count *out, size_t cap);

/* Writes a formatted open() failure followed by "; hint" into err (when there is one), and
 * returns code. */
int backend_vopen_fail(int code, char *err, size_t errlen, const char *hint, const char *fmt,
                       va_list ap) __attribute__((format(printf, 5, 0)));

/* Copies a library's string buffer, which may lack its NUL, into dst (always terminated). */
void backend_copy_str(char *dst, size_t dstlen, const char *src, size_t srclen);

/* The start of every sample(): out zeroed and stamped, err emptied. Returns 0, or GS_ENOTFOUND
 * (err says so) when there is no device i of ndevs. */
int backend_sample_begin(size_t i, size_t ndevs, struct gpu_sample *out, char *err, size_t errlen);

/* Counts a sample() call on a device at now_ms (monotonic) and returns the time since its
 * previous one (0 on the first). */
int64_t backend_sample_call(int64_t *prev_call_ms, uint64_t *calls, int64_t now_ms);

/* A device out of service: err gets its reason, and down_rc is returned. */
int backend_sample_down(const char *down, int down_rc, char *err, size_t errlen);

/* An identification retry failed: the wait (in sample calls) doubles, capped so that it never
 * passes max_ms at the current interval (since), and the next try is set. */
void backend_retry_later(uint64_t *wait, uint64_t *next_try, uint64_t calls, int64_t since,
                         int64_t max_ms);

/* A device not identified at open: info() shows a copy (*at_open) until it is, and the first
 * retry is one call after the first sample. False when out of memory (it is then not retried). */
bool backend_hold_identity(const struct gpu_info *info, struct gpu_info **at_open,
                           _Atomic(const struct gpu_info *) *shown, uint64_t *next_try,
                           uint64_t *wait);

/* A field call failed with an error (not merely unsupported): its fields (bits) not read are
 * marked failed, the sample's first failure goes to err as "call: es", and *failed counts it.
 * Returns true when the backend should log it now (rate-limited by cp). */
bool backend_field_failed(struct gpu_sample *out, uint64_t bits, unsigned *failed, char *err,
                          size_t errlen, const char *call, const char *es, struct log_complain *cp);

/* The end of a sample that read what it could: GS_EIO when nothing answered and some call failed
 * (err then says how many, and the first), else 0. */
int backend_sample_end(const struct gpu_sample *out, unsigned failed, char *err, size_t errlen);

#endif
