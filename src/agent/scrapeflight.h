/* Scrape coalescing for /metrics: one render serves every scrape that arrives while it runs. */
#ifndef GS_SCRAPEFLIGHT_H
#define GS_SCRAPEFLIGHT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/buf.h"

struct scrape_flight;

/* NULL on ENOMEM. scrape_flight_free(NULL) is fine. */
struct scrape_flight *scrape_flight_new(void);
void scrape_flight_free(struct scrape_flight *f);

/* Renders a body with render(ud, body) and appends it to out, gzipped when gz; or, when another
 * caller's render is under way, waits for it and appends that body instead (its gzip made once,
 * by whichever caller wants it first). Returns 0 or the render's (or gzip's) error, the same for
 * every caller it served; out is then untouched. *shared (may be NULL) tells the second case. */
int scrape_flight_serve(struct scrape_flight *f, int (*render)(void *ud, struct buf *body),
                        void *ud, bool gz, struct buf *out, bool *shared);
/* Renders done so far, and callers now waiting for one (for tests and self-metrics). */
uint64_t scrape_flight_renders(struct scrape_flight *f);
unsigned scrape_flight_waiting(struct scrape_flight *f);

#endif
