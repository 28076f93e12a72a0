/* Shared selections (docs/gateway.md, "Sizing"): triggers that differ only in what the policy
 * does with a selection (targetValue, activationThreshold, aggregation, metricName, allowPartial,
 * minCoverage, pollIntervalSeconds, value) select the same GPUs, so at one stamp (see
 * keda/trigger_cache.h) the selection is made once and each trigger judges a copy of it; those
 * that differ only in their target, activation or names also share the judged value. A bounded
 * table, thread-safe. */
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
/* Forgets every kept selection and value (what the keys mean changed: profiles reloaded). */
void selshare_clear(struct selshare *s);
/* SELSHARE_SELECTION: the keys that choose GPUs. SELSHARE_VALUE: those and the ones that judge
 * the selection (aggregation, allowPartial, minCoverage, value): triggers that differ only in
 * targetValue, activationThreshold, metricName or pollIntervalSeconds get the same value. */
enum selshare_kind { SELSHARE_SELECTION, SELSHARE_VALUE };
/* The key of metadata md (with the ref's namespace) of that kind, in key order. Returns its
 * length, or 0 when it does not fit (then nothing is shared). */
size_t selshare_key(const struct kv *md, size_t n, const char *ref_ns, enum selshare_kind kind,
                    char *key, size_t cap);
/* A deep copy of the selection kept for key at stamp into *out (zeroed by the caller; released
 * with scaler_selection_release). Returns true on a hit. */
bool selshare_get(struct selshare *s, const char *key, size_t klen, uint64_t stamp,
                  struct scaler_selection *out);
/* Keeps a copy of sel for key at stamp (replacing an older stamp's; when full, the entry with the
 * oldest stamp). Nothing is kept on ENOMEM, nor for a selection with notes (sel->missing: their
 * ages must stay current, so such selections are made again on every call). */
void selshare_put(struct selshare *s, const char *key, size_t klen, uint64_t stamp,
                  const struct scaler_selection *sel);

/* A judged value kept for a value key at stamp: *out gets it (its activation, metric name and
 * answer are the caller's to set). Only successful judgements are kept. */
bool selshare_value_get(struct selshare *s, const char *key, size_t klen, uint64_t stamp,
                        struct scaler_result *out);
void selshare_value_put(struct selshare *s, const char *key, size_t klen, uint64_t stamp,
                        const struct scaler_result *r);

#endif
