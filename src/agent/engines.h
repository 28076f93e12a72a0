/* Engine pods on this node (issue 12): the agent lists and watches its node's pods through the
 * Kubernetes API, scrapes those that ask for it (annotations) on their pod IP, on a thread of its
 * own, and keeps one struct engine_reading per pod. Also the operator's opt-in to scrape a URL
 * named in a trigger (--allow-engine-endpoints) and the safety check of such a URL.
 *
 * Which pods are read (docs/engines.md):
 *   - gpuscale.io/engine (vllm|tgi|sglang|triton) with gpuscale.io/metrics-port, and optionally
 *     gpuscale.io/metrics-path (default /metrics);
 *   - or, without gpuscale.io/engine: prometheus.io/scrape="true" with prometheus.io/port (and
 *     prometheus.io/path); the engine is then detected from the metric names the pod serves.
 *     Until detected such a pod has kind ENGINE_UNKNOWN and is no engine pod for any trigger;
 *     one that serves no engine's metrics is listed with a reason and read again only every
 *     10 engine intervals or 60 s, whichever is longer. Once detected, the kind stays.
 * Only Running and Ready pods of this node with a pod IP from the API are fetched. Pods that are
 * not Ready (Pending included), terminating, or LeaderWorkerSet workers are listed with their
 * state and reason and never fetched (docs/engines.md, "Pods that are not Ready, terminating, or
 * part of a LeaderWorkerSet"). A pod with a bad annotation value, or whose scrape failed (timeout,
 * over PROMTEXT_MAX_BYTES, not 200, not the text format), is listed with fresh=false, no values and
 * a reason. */
#ifndef GS_AGENT_ENGINES_H
#define GS_AGENT_ENGINES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/engine.h"

#define ENGINE_ANN_ENGINE "gpuscale.io/engine"
#define ENGINE_ANN_PORT "gpuscale.io/metrics-port"
#define ENGINE_ANN_PATH "gpuscale.io/metrics-path"
#define ENGINE_ANN_PROM_SCRAPE "prometheus.io/scrape"
#define ENGINE_ANN_PROM_PORT "prometheus.io/port"
#define ENGINE_ANN_PROM_PATH "prometheus.io/path"
#define ENGINE_DEFAULT_PATH "/metrics"
#define ENGINE_URL_CACHE                                                                           \
  32 /* URLs engines_scrape_url reads at a time (readings, Triton counters) */
#define ENGINE_URL_KEEP_MS 600000 /* a URL not asked for this long is no longer read */
#define ENGINE_URL_KEEP_ROUNDS 60 /* ... or for this many engine intervals, if longer */

struct engines_config {
  const char *mode;     /* --engines: "auto" (on when the Kubernetes API can be used) or "off" */
  const char *kube_api; /* the agent's --kube-api: "auto", "off" or a kubeconfig path */
  const char *node;     /* this node's name (spec.nodeName of the pods read) */
  int64_t interval_ms;  /* --engine-interval: one scrape of every engine pod per interval */
  int64_t timeout_ms;   /* --engine-timeout: per pod and request (cut to interval_ms) */
  bool allow_endpoints; /* --allow-engine-endpoints: engines_scrape_url may be used */
};

struct engines;

/* Starts pod discovery and the scrape thread. Returns 0 with *out set (never NULL on success):
 * without API access (--engines off, --kube-api off, auto outside a cluster, a service account
 * that cannot be used) the object runs no thread and engines_copy answers on=false with why,
 * which is also written to why here ("" when discovery runs). Errors: GS_EINVAL (bad config:
 * why names the option), GS_ENOMEM, GS_EIO (no thread), with why. */
int engines_start(const struct engines_config *cfg, struct engines **out, char *why, size_t whylen);
/* Stops the threads (a scrape in flight is abandoned) and frees. NULL is fine. */
void engines_stop(struct engines *e);

/* A heap copy of every engine pod's reading (*out, caller frees; NULL when *n is 0), with fresh
 * computed now (the last scrape succeeded and is at most 3 engine intervals old). *on is false
 * when engine discovery is off or the pod list cannot be had now; why (may be NULL) says why,
 * "" when on. Thread-safe, never blocks on I/O. e NULL: *n 0, *on false. Returns 0 or
 * GS_ENOMEM. */
int engines_copy(struct engines *e, struct engine_reading **out, size_t *n, bool *on, char *why,
                 size_t whylen);
/* The same, with the latency readings widened to window_ms (a trigger's window, 0: one engine
 * interval): each pod's window histograms of the scrapes taken within window_ms of its newest
 * (core/latwin.h, docs/engines.md "The window"). A pod keeps its last LATWIN_ENTRIES scrapes. */
int engines_copy_window(struct engines *e, int64_t window_ms, struct engine_reading **out,
                        size_t *n, bool *on, char *why, size_t whylen);

/* The engine interval (ms) and whether --allow-engine-endpoints was given. NULL: 0 / false. */
int64_t engines_interval_ms(const struct engines *e);
bool engines_endpoints_allowed(const struct engines *e);

/* The operator's opt-in: the last reading of one URL named in a trigger (vllmEndpoint,
 * tritonEndpoint) as an engine of `kind`. Refused (GS_EINVAL, err says why) unless
 * --allow-engine-endpoints was given and engine_endpoint_check passes. Never does network I/O
 * and never waits for one: the URL is read off the caller by its own refresher thread
 * (engine_urls.h), once per engine interval while it is asked for (dropped after
 * ENGINE_URL_KEEP_MS, or ENGINE_URL_KEEP_ROUNDS intervals if longer, without a call), which
 * resolves the name, checks every address (engine_endpoint_resolve) and sends the request to the
 * checked address only (no second name lookup, no redirects, no proxy). Triton's counters are
 * kept per URL for the rates. Fills *out from the last read (ns and pod empty; fresh when it
 * succeeded at most 3 engine intervals ago). Returns 0 when *out holds a successful read
 * (signals absent from the exposition are absent from out->valid); GS_EUNAVAIL when there is no
 * reading (err and out->reason say why: the first read of a URL asked for the first time is
 * pending, the read failed, or ENGINE_URL_CACHE URLs are already read); GS_EINVAL when the name
 * resolves to an address the rule refuses; GS_ENOMEM. Thread-safe. */
int engines_scrape_url(struct engines *e, const char *url, enum engine_kind kind,
                       struct engine_reading *out, char *err, size_t errlen);

/* The safety rule for a URL from a trigger, as far as the URL itself decides it, with no name
 * lookup (it runs on gRPC handlers, when a trigger is parsed): http:// or https:// only, no user
 * info, not a metadata or this machine's name (metadata.google.internal and metadata names,
 * localhost), and an IP literal that is not loopback (127/8, ::1), unspecified (0.0.0.0, ::),
 * link-local (169.254/16, fe80::/10) or a cloud metadata address (169.254.169.254,
 * fd00:ec2::254, 100.100.100.200); IPv4-mapped IPv6 addresses are checked as IPv4. A host name
 * passes here: every address it resolves to is checked by the refresher before each request
 * (engine_endpoint_resolve in engine_endpoint.h). Returns 0, or GS_EINVAL with err naming the URL
 * and the rule it breaks. */
int engine_endpoint_check(const char *url, char *err, size_t errlen);

#endif
