/* The agent's /metrics route: dcgm-exporter-compatible exposition rendered from the history. */
#ifndef GS_METRICS_H
#define GS_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/api.h"
#include "core/attrib.h"
#include "core/buf.h"
#include "core/stats.h"
#include "http/server.h"

struct scrape_flight;

struct metrics_ctx {
  const struct agent_api *api; /* history, sampler counters (sampler may be NULL), node name,
                                  driver version, interval; must outlive the route */
  struct attrib *attrib;       /* pod attribution; NULL when it is off (no pod labels) */
  struct stats *stats;         /* gRPC self-metrics; NULL leaves them out */
  bool hostname_label;         /* hostname = api->node_name; false with --no-hostname-label */
  bool per_pod_series; /* --shared-gpu-series per-pod: a shared GPU's value series once per pod */
  const struct counters *counters; /* --collectors: the series to write; NULL = the default set */
  const char *host_label_name;     /* --hostname-label: "hostname" (NULL) or "Hostname" */
  bool dra_labels;                 /* --kubernetes-enable-dra: the dra_* labels */
  bool pod_uid;                    /* --kubernetes-enable-pod-uid: the pod_uid label */
  int64_t xid_window_ms;           /* --xid-count-window-size: DCGM_EXP_XID_ERRORS_COUNT's window */
  int64_t clock_window_ms; /* --clock-events-count-window-size: DCGM_EXP_CLOCK_EVENTS_COUNT's */
  const struct dcgm_names *names; /* --dcgm-names(-file): NULL = dcgm-exporter 4.8's names */
  /* Scrape coalescing: a scrape that arrives while another renders is served that render's body
   * (agent/scrapeflight.h). NULL: every scrape renders its own. */
  struct scrape_flight *flight;
};

/* The /metrics handler (an http_route's handle, ud = struct metrics_ctx *): renders, gzips when
 * the client accepts it, answers 500 with a short text if rendering fails. Never calls NVML. */
void metrics_handle(void *ud, const struct http_request *req, struct http_response *resp);
/* Renders one scrape's body (uncompressed) into out, exactly as /metrics serves it. Returns 0,
 * GS_ENOMEM or GS_ETOOBIG (out's cap). */
int metrics_render(const struct metrics_ctx *m, struct buf *out);

/* Bench support: ngpus mock GPUs (every 4th shared by two pods, every 2nd held by one pod) in a
 * real history, attribution table and stats, so that metrics_mock_render times the same path
 * as a scrape (snapshot, pod lookup, render). NULL on ENOMEM. */
struct metrics_mock;
struct metrics_mock *metrics_mock_new(size_t ngpus);
/* The same with a chosen set: full = every field of issue 11 on every GPU (H100s with GPM) and the
 * default series set, as the agent serves it; !full = the 9 fields and 7 DCGM series /metrics
 * had before (a counters file naming them), for the bench's side-by-side figure. */
struct metrics_mock *metrics_mock_new_set(size_t ngpus, bool full);
/* One scrape's render into out (reset first); gzip as well when gz is true. Returns 0 or GS_E*. */
int metrics_mock_render(struct metrics_mock *mm, bool gz, struct buf *out);
/* The mock's context, to serve it with metrics_handle (scrapes-per-second bench). */
struct metrics_ctx *metrics_mock_ctx(struct metrics_mock *mm);
/* metrics_mock_free(NULL) is fine. */
void metrics_mock_free(struct metrics_mock *mm);

#endif
