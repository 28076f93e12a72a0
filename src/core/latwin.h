/* A latency trigger's window over one engine pod (docs/engines.md "Latency", "The window"): a
 * bounded ring of the pod's per-scrape window histograms (the bucket deltas of each scrape, as the
 * agent reads them), so that a trigger with `window` reads the requests that finished within it:
 * the sum of the deltas of the scrapes taken in the window, as Prometheus'
 * histogram_quantile(q, sum(increase(..._bucket[window]))) would. Kept by the agent (per pod it
 * reads), by the gateway (per pod it receives) and by the simulator, with the same arithmetic.
 *
 * Memory: LATWIN_ENTRIES entries of one timestamp each, plus per latency family its bounds and
 * LATWIN_ENTRIES x (its bounds) counts, allocated at the first histogram pushed: about 32 KiB for
 * a vLLM pod (three families of about 20 bounds), at most 3 x 64 x 64 x 8 B = 96 KiB. */
#ifndef GS_LATWIN_H
#define GS_LATWIN_H

#include <stdint.h>

#include "core/engine.h"

/* Scrapes one pod's ring keeps: the longest window that can be read is this many engine
 * intervals (5 min 20 s at the agent's default 5 s --engine-interval). */
#define LATWIN_ENTRIES 64

struct latwin_fam {
  uint32_t n; /* bounds, 0 until the first histogram */
  double le[LATENCY_MAX_BUCKETS];
  double *cnt; /* LATWIN_ENTRIES x n per-scrape cumulative counts, entry-major */
};

struct latwin {
  int64_t last_ts; /* scrape time (ms) of the newest entry; 0: none */
  uint32_t head, len;
  int64_t ts[LATWIN_ENTRIES];
  uint8_t has[LATWIN_ENTRIES]; /* bit f: the entry holds family f's delta */
  struct latwin_fam fam[ENGINE_LAT_FAMILIES];
};

/* Frees w's counts and empties it (a zeroed struct is an empty ring). */
void latwin_free(struct latwin *w);

/* Records the scrape that r holds (r->ts_ms): each latency family whose signal r has, with its
 * window histogram r->lat[f]. A scrape at or before the newest one recorded is a re-sent reading
 * and changes nothing. A family whose bounds differ from those kept restarts: its earlier deltas
 * are forgotten (they cannot be summed with the new ones). A family r lacks (nothing finished
 * while the pod was busy, a window that could not be read) adds nothing for that scrape.
 * Returns 0, or GS_ENOMEM (the scrape is then not kept: a window holds one fewer). */
int latwin_push(struct latwin *w, const struct engine_reading *r);

/* The window histogram of family f: the deltas of the scrapes taken after end_ms - window_ms and
 * at or before end_ms, summed into *out (out->n 0 when none holds the family). Returns the
 * number of scrapes summed. */
uint32_t latwin_sum(const struct latwin *w, int f, int64_t window_ms, int64_t end_ms,
                    struct latency_hist *out);

/* Widens r's latency readings (r being the pod's newest reading, already pushed) to window_ms
 * ending at r's scrape: for each latency signal of r's engine, when the scrapes in the window
 * finished any request, r->lat[f] becomes their summed histogram and r->v[s] its count, and the
 * signal is present; when they finished none, r keeps its newest scrape's reading (idle: 0
 * observations; busy or unreadable: absent with its reason). The newest scrape is always in the
 * window, so a window shorter than one engine interval reads one interval. window_ms <= 0 leaves
 * r as it is. */
void latwin_apply(const struct latwin *w, int64_t window_ms, struct engine_reading *r);

/* Whether r carries a latency signal (an LLM pod's reading that a window would read). */
bool latwin_wanted(const struct engine_reading *r);

#endif
