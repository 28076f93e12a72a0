/* A bounded, thread-safe cache of parsed triggers keyed by the trigger metadata, so that KEDA's
 * polls (the same metadata every few seconds) skip the parse and the regex compilation. */
#ifndef GS_TRIGGER_CACHE_H
#define GS_TRIGGER_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/trigger.h"

/* Entries kept by default: far more distinct triggers than one agent or gateway is asked about. */
#define TRIGGER_CACHE_DEFAULT_ENTRIES 128
/* Metadata larger than this (keys, values and the namespace, in bytes) or with more keys than
 * TRIGGER_CACHE_MAX_KEYS is parsed on every call and never cached. */
#define TRIGGER_CACHE_MAX_KEY_BYTES 8192
#define TRIGGER_CACHE_MAX_KEYS 64

struct trigger_cache;
struct trigger_cache_entry;
struct selshare;

/* A cache of at most max_entries triggers (<= 0: TRIGGER_CACHE_DEFAULT_ENTRIES). NULL on ENOMEM. */
struct trigger_cache *trigger_cache_new(int max_entries);
/* Frees the cache and every entry. Entries still held (see trigger_cache_get) must have been
 * released first. NULL is fine. */
void trigger_cache_free(struct trigger_cache *c);
/* Drops every entry (held ones are freed when released): call it when what a parse depends on
 * changes, e.g. the profile set was reloaded. Thread-safe. */
void trigger_cache_clear(struct trigger_cache *c);

/* The key is the metadata as a set: the order of the pairs does not matter (KEDA's Go client
 * sends map entries in any order), except between pairs of one repeated key, where the last one
 * counts, as in trigger_parse. ref_ns is part of the key (NULL = ""). */

/* On a hit: copies the trigger into *out and returns a hold that keeps the copy's compiled
 * regexes alive until trigger_cache_release. Never trigger_free a copy. NULL on a miss, or when
 * c is NULL. Thread-safe. */
struct trigger_cache_entry *trigger_cache_get(struct trigger_cache *c, const struct kv *md,
                                              size_t n, const char *ref_ns, struct trigger *out);
/* Stores *t, a trigger parsed (by the caller) from exactly this metadata and ref_ns. On success
 * the cache takes over t's regexes (do not trigger_free t any more) and returns a hold on the new
 * entry, released like trigger_cache_get's; the least recently used entry may be evicted. NULL
 * when not stored (c NULL, metadata over the caps, or ENOMEM): the caller still owns t. */
struct trigger_cache_entry *trigger_cache_put(struct trigger_cache *c, const struct kv *md,
                                              size_t n, const char *ref_ns,
                                              const struct trigger *t);
/* Releases a hold from get or put; the entry is freed once evicted and no longer held. NULL e is
 * fine. */
void trigger_cache_release(struct trigger_cache *c, struct trigger_cache_entry *e);
/* For a caller that keeps a hold across calls (a stream): the held entry's trigger, read in place
 * (valid while held), and whether the entry is still in the table (false once cleared, evicted
 * or replaced: then the caller releases it and gets the trigger again). */
const struct trigger *trigger_cache_entry_trigger(const struct trigger_cache_entry *e);
bool trigger_cache_entry_live(struct trigger_cache *c, const struct trigger_cache_entry *e);

/* ---- Shared answers (docs/gateway.md, "Sizing") ----
 * A source that can tell when a trigger's answer may have changed sets a stamp function: it
 * returns a value that moves whenever anything the trigger's selection reads may have changed,
 * or 0 when it cannot tell (then every call evaluates). The scaler then keeps, on each entry, the
 * last IsActive answer and the stamp it was computed at, so that the streams and polls of one
 * trigger share one evaluation per change, and an unchanged trigger costs a lookup. Call before
 * the cache is shared between threads. */
void trigger_cache_set_stamp(struct trigger_cache *c,
                             uint64_t (*stamp)(void *ud, const struct trigger *t), void *ud);
/* With a stamp function set: the table of selections shared between triggers that select the
 * same GPUs (keda/selshare.h); NULL otherwise. */
struct selshare *trigger_cache_selshare(struct trigger_cache *c);
/* Whether c has a stamp function (false for NULL). */
bool trigger_cache_shares(const struct trigger_cache *c);
/* The stamp for t (0 without a stamp function, or when c is NULL). */
uint64_t trigger_cache_stamp(struct trigger_cache *c, const struct trigger *t);
/* On held entry e: true and *active when an answer computed at stamp (non-zero) is kept. */
bool trigger_cache_memo_get(struct trigger_cache *c, struct trigger_cache_entry *e, uint64_t stamp,
                            bool *active);
/* Keeps active as e's answer at stamp (a later stamp replaces an earlier one). */
void trigger_cache_memo_put(struct trigger_cache *c, struct trigger_cache_entry *e, uint64_t stamp,
                            bool active);

/* Counters since trigger_cache_new, for tests and /metrics. */
struct trigger_cache_stats {
  unsigned long long hits, misses, evictions;
  size_t entries;
  unsigned long long memo_hits, memo_misses; /* shared answers used / computed */
};
void trigger_cache_stats(struct trigger_cache *c, struct trigger_cache_stats *out);

#endif
