/* The trigger metadata keys gpuscale reads or knows to ignore, and the nearest known key to one it
 * does not: a typo such as targetGpuUtilizaton is otherwise silently ignored (KEDA passes every
 * key, so an unknown one can never be refused). Shared by the scaler's log and `gpuscale lint`. */
#ifndef GS_TRIGGER_KEYS_H
#define GS_TRIGGER_KEYS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/trigger.h" /* struct kv */

/* True when key is one trigger_parse reads, or one KEDA's external scaler itself uses
 * (scalerAddress, its TLS keys). Case-sensitive, as trigger_parse is. */
bool trigger_key_known(const char *key);
/* The known key nearest to key (case-insensitive edit distance, at most 2, or a third of the key's
 * length for long keys), or NULL when none is near. Static storage. */
const char *trigger_key_suggest(const char *key);
/* Writes the unknown keys of md into buf, each as `key` or `key (did you mean known?)`,
 * separated by ", ", truncated to len. Returns how many keys are unknown (0: buf is ""). A key
 * repeated in md is listed once per occurrence. */
size_t trigger_unknown_keys(const struct kv *md, size_t n, char *buf, size_t len);

#endif
