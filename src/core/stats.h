/* The agent's self-metrics: gRPC calls by method and code, and a latency histogram per method. */
#ifndef GS_STATS_H
#define GS_STATS_H

#include <stddef.h>
#include <stdint.h>

#define STATS_MAX_METHODS 24 /* distinct method paths kept; later ones count under "other" */
#define STATS_METHOD_LEN 128 /* longer paths are truncated */
#define STATS_NCODES 17      /* gRPC status codes 0..16; others count as UNKNOWN (2) */
#define STATS_NBUCKETS 13    /* finite histogram buckets; +Inf is implicit */

/* Upper bounds (seconds) of the latency buckets: 100us .. 1s, ascending. */
extern const double stats_buckets[STATS_NBUCKETS];

struct stats_method {
  char name[STATS_METHOD_LEN];
  uint64_t codes[STATS_NCODES];     /* finished calls by gRPC status code */
  uint64_t buckets[STATS_NBUCKETS]; /* calls with duration <= stats_buckets[i] (cumulative) */
  uint64_t count;                   /* all finished calls (the +Inf bucket) */
  double sum;                       /* total seconds */
};

/* A consistent copy of every counter, taken under the lock; methods in first-seen order. */
struct stats_snapshot {
  size_t n;
  struct stats_method m[STATS_MAX_METHODS];
};

struct stats;

/* Empty counters. NULL on ENOMEM. */
struct stats *stats_new(void);
/* stats_free(NULL) is fine. */
void stats_free(struct stats *s);
/* Records one finished call; matches rpc_server_config.observe (ud is the struct stats, NULL
 * ignores the call). Thread-safe; never blocks for long. Negative or NaN durations count as 0. */
void stats_observe(void *ud, const char *method, int grpc_code, double seconds);
/* Copies every counter into *out (which the caller owns). */
void stats_snapshot(struct stats *s, struct stats_snapshot *out);

#endif
