/* The bookkeeping that the library-backed collectors (NVML, ROCm SMI) share: error counters,
 * open() failures, and the steps of a sample that do not depend on the library. */
#include "collect/backend_common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/timeutil.h"

size_t backend_code_slot(const struct backend_codes *c, int64_t rc) {
  if (rc > 0 && (uint64_t)rc < c->nnamed && c->names[rc])
    return (size_t)rc;
  return rc == c->unknown ? c->nnamed : c->nnamed + 1;
}

const char *backend_slot_name(const struct backend_codes *c, size_t slot) {
  if (slot == c->nnamed)
    return c->unknown_name;
  return slot < c->nnamed && c->names[slot] ? c->names[slot] : "OTHER";
}

size_t backend_errors(const atomic_uint_fast64_t *errors, size_t ncalls, size_t nslots,
                      const char *const *call_names, const struct backend_codes *codes,
                      struct collector_error_count *out, size_t cap) {
  size_t k = 0;
  for (size_t call = 0; call < ncalls; call++)
    for (size_t slot = 0; slot < nslots; slot++) {
      uint64_t v = atomic_load_explicit(&errors[call * nslots + slot], memory_order_relaxed);
      if (v == 0)
        continue;
      if (k < cap)
        out[k] =
            (struct collector_error_count){call_names[call], backend_slot_name(codes, slot), v};
      k++;
    }
  return k;
}

int backend_vopen_fail(int code, char *err, size_t errlen, const char *hint, const char *fmt,
                       va_list ap) {
  if (!err || errlen == 0)
    return code;
  vsnprintf(err, errlen, fmt, ap);
  size_t len = strlen(err);
  if (len + 1 < errlen)
    snprintf(err + len, errlen - len, "; %s", hint);
  return code;
}

void backend_copy_str(char *dst, size_t dstlen, const char *src, size_t srclen) {
  size_t n = strnlen(src, srclen);
  if (n >= dstlen)
    n = dstlen - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

int backend_sample_begin(size_t i, size_t ndevs, struct gpu_sample *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  out->ts_ms = time_wall_ms();
  out->mono_ms = time_mono_ms();
  if (err && errlen)
    err[0] = '\0';
  if (i >= ndevs) {
    if (err && errlen)
      snprintf(err, errlen, "no device %zu (have %zu)", i, ndevs);
    return GS_ENOTFOUND;
  }
  return 0;
}

int64_t backend_sample_call(int64_t *prev_call_ms, uint64_t *calls, int64_t now_ms) {
  int64_t since = *prev_call_ms ? now_ms - *prev_call_ms : 0;
  *prev_call_ms = now_ms;
  (*calls)++;
  return since;
}

int backend_sample_down(const char *down, int down_rc, char *err, size_t errlen) {
  if (err && errlen)
    snprintf(err, errlen, "%s", down);
  return down_rc;
}

void backend_retry_later(uint64_t *wait, uint64_t *next_try, uint64_t calls, int64_t since,
                         int64_t max_ms) {
  *wait *= 2;
  if (since > 0 && (int64_t)*wait * since > max_ms)
    *wait = max_ms / since > 1 ? (uint64_t)(max_ms / since) : 1;
  *next_try = calls + *wait;
}

bool backend_hold_identity(const struct gpu_info *info, struct gpu_info **at_open,
                           _Atomic(const struct gpu_info *) *shown, uint64_t *next_try,
                           uint64_t *wait) {
  /* Identified later, on the sampler's thread, while other threads may read info(): they see
   * this copy until then, and the live one, complete, after. */
  *at_open = malloc(sizeof **at_open);
  if (!*at_open)
    return false;
  **at_open = *info;
  atomic_init(shown, *at_open);
  *next_try = 2; /* one call (an interval) after the first sample */
  *wait = 1;
  return true;
}

bool backend_field_failed(struct gpu_sample *out, uint64_t bits, unsigned *failed, char *err,
                          size_t errlen, const char *call, const char *es,
                          struct log_complain *cp) {
  out->failed |= bits & ~out->valid; /* absent because it failed, not unsupported */
  if ((*failed)++ == 0 && err && errlen)
    snprintf(err, errlen, "%s: %s", call, es);
  return log_complain(cp, time_mono_ms());
}

int backend_sample_end(const struct gpu_sample *out, unsigned failed, char *err, size_t errlen) {
  if (out->valid != 0 || failed == 0)
    return 0;
  /* Nothing answered: the GPU is not serving, not merely missing a field. */
  if (err && errlen) {
    char first[128];
    snprintf(first, sizeof first, "%s", err);
    snprintf(err, errlen, "every reading failed (%u calls), first %s", failed, first);
  }
  return GS_EIO;
}
