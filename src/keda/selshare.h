/* Shared selections (docs/gateway.md, "Sizing"): triggers that differ only in what the policy
 * does with a selection (targetValue, activationThreshold, aggregation, metricName, allowPartial,
 * minCoverage, pollIntervalSeconds, value) select the same GPUs, so at one stamp (see
 * keda/trigger_cache.h) the selection is made once and each trigger judges a copy of it. A
 * bounded table, thread-safe. */
#ifndef GS_KEDA_SELSHARE_H
#define GS_KEDA_SELSHARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/trigger.h"
#include "keda/scaler.h"

#define SELSHARE_ENTRIES 1024
#define SELSHARE_KEY_MAX 4096

struct selshare;

struct selshare *selshare_new(void);
void selshare_free(struct selshare *s);
/* The selection key of metadata md (with the ref's namespace): the keys that choose GPUs, in
 * key order. Returns its length, or 0 when it does not fit (then nothing is shared). */
size_t selshare_key(const struct kv *md, size_t n, const char *ref_ns, char *key, size_t cap);
/* A deep copy of the selection kept for key at stamp into *out (zeroed by the caller; released
 * with scaler_selection_release). Returns true on a hit. */
bool selshare_get(struct selshare *s, const char *key, size_t klen, uint64_t stamp,
                  struct scaler_selection *out);
/* Keeps a copy of sel for key at stamp (replacing an older stamp's; when full, the entry with the
 * oldest stamp). Nothing is kept on ENOMEM, nor for a selection with notes (sel->missing: their
 * ages must stay current, so such selections are made again on every call). */
void selshare_put(struct selshare *s, const char *key, size_t klen, uint64_t stamp,
                  const struct scaler_selection *sel);

#endif
