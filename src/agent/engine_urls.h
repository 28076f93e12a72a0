/* The URLs named in triggers (--allow-engine-endpoints), read off the gRPC handlers: a bounded
 * table of URLs, each with its last reading and a refresher thread of its own that reads it once
 * per engine interval while it is asked for. A caller registers interest and gets the last
 * reading at once; no caller ever waits for a read, and a slow URL (a slow name lookup, a slow
 * answer) delays no other URL. */
#ifndef GS_AGENT_ENGINE_URLS_H
#define GS_AGENT_ENGINE_URLS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/engine_read.h"
#include "agent/engines.h"
#include "core/engine.h"

#define ENGINE_URLS_URL_MAX 1024 /* bytes of a URL, with its NUL */

/* Reads url once as an engine of kind: fills *out (zeroed), updates this URL's *prev (Triton's
 * counters). Returns 0 (out holds the values served), GS_EUNAVAIL (out->reason says why) or
 * GS_EINVAL (the URL breaks the safety rule now, e.g. its name resolves to a blocked address;
 * out->reason says how). Called from the URL's refresher thread; must return soon once *stop is
 * true (the table is being freed). */
typedef int (*engine_urls_read_fn)(void *ud, const char *url, enum engine_kind kind,
                                   struct engine_prev *prev, struct engine_reading *out,
                                   const atomic_bool *stop);

struct engine_urls_config {
  int64_t interval_ms; /* each URL is read once per interval; fresh: read ok at most 3 ago */
  int64_t keep_ms;     /* a URL not asked for this long is dropped and its thread ends */
  engine_urls_read_fn read;
  void *read_ud;
};

struct engine_urls;

/* A table of at most ENGINE_URL_CACHE URLs. No thread runs until a URL is asked for. Returns 0
 * and *out, GS_EINVAL (interval or keep not positive, no read) or GS_ENOMEM. */
int engine_urls_new(const struct engine_urls_config *cfg, struct engine_urls **out);
/* Stops every refresher (each returns once its read does: read sees *stop) and frees. NULL is
 * fine. */
void engine_urls_free(struct engine_urls *u);

/* The last reading of (url, kind), from any thread, without waiting for I/O; registers interest,
 * so that the URL is read once per interval from now on (its first read starts at once when it
 * is new). Fills *out (fresh computed now). Returns:
 *   0           the last read succeeded (fresh says whether it is at most 3 intervals old; when
 *               not, out->reason says so);
 *   GS_EUNAVAIL no reading: the first read is pending (err says "first read pending: ..."),
 *               the last read failed (err: its reason), or the table holds ENGINE_URL_CACHE
 *               URLs asked for within keep_ms, or no thread could be started (err says which);
 *   GS_EINVAL   the last read found the URL breaks the rule (err: how).
 * err is "" on 0. */
int engine_urls_get(struct engine_urls *u, const char *url, enum engine_kind kind,
                    struct engine_reading *out, char *err, size_t errlen);

#endif
