/* The C-core client pieces that bench/gs_load (load.c) and bench/gs_soak (soak.c) share: one
 * channel per connection, a unary call's ops, the KEDA request messages, percentiles, and N
 * StreamIsActive calls held open on connections of GS_STREAMS_PER_CHANNEL streams each, drained
 * by one thread. Everything is for the benchmark clients only (loopback, bounded runs). */
#ifndef GS_BENCH_GRPC_STREAMS_H
#define GS_BENCH_GRPC_STREAMS_H

#include <grpc/grpc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "externalscaler.pb-c.h"

#define GS_MAX_MD 16
#define GS_MAX_STREAMS 20000
#define GS_STREAMS_PER_CHANNEL 100 /* StreamIsActive calls per connection */

extern const char gs_m_spec[];    /* /externalscaler.ExternalScaler/GetMetricSpec */
extern const char gs_m_metrics[]; /* /externalscaler.ExternalScaler/GetMetrics */
extern const char gs_m_stream[];  /* /externalscaler.ExternalScaler/StreamIsActive */

int64_t gs_now_ns(void); /* CLOCK_MONOTONIC */
gpr_timespec gs_in_ms(int64_t ms);

/* A channel to target with its own TCP connection (local subchannel pool), no HTTP proxy. */
grpc_channel *gs_channel(const char *target);

/* The packed message (free()), or NULL when out of memory. */
uint8_t *gs_pack(const ProtobufCMessage *m, size_t *len);

/* The trigger metadata (-m key=value) of a run, and the ScaledObjectRef that carries it: ents
 * and ptrs are the caller's arrays of GS_MAX_MD, which ref points into. */
struct gs_md {
  size_t n;
  char *key[GS_MAX_MD], *val[GS_MAX_MD];
};
/* Adds "key=value" to md; -1 when it has no '=' or md is full (the caller names the option). */
int gs_md_add(struct gs_md *md, const char *kv);
void gs_md_free(struct gs_md *md);
void gs_make_ref(Externalscaler__ScaledObjectRef *ref,
                 Externalscaler__ScaledObjectRef__ScalerMetadataEntry *ents,
                 Externalscaler__ScaledObjectRef__ScalerMetadataEntry **ptrs, const char *name,
                 const struct gs_md *md);

/* One unary call: SEND_INITIAL_METADATA, SEND_MESSAGE body, SEND_CLOSE, RECV_INITIAL_METADATA,
 * RECV_MESSAGE, RECV_STATUS, all in one batch with tag. path must outlive the call (a static
 * string); body is consumed (unref'd) either way. Returns 0, or -1 when C-core refused the batch
 * (the call is then released). gs_unary_done releases a finished call. */
struct gs_unary {
  grpc_call *call;
  grpc_metadata_array init_md, trailing_md;
  grpc_byte_buffer *recv;
  grpc_status_code status;
  grpc_slice details;
};
int gs_unary_start(struct gs_unary *u, grpc_channel *ch, grpc_completion_queue *cq,
                   const char *path, gpr_timespec deadline, grpc_slice body, void *tag);
void gs_unary_done(struct gs_unary *u);

/* One blocking call (deadline deadline_ms) on a private queue; returns the response bytes
 * (free()) or NULL with *status and msg set (msg also holds the status details on success). */
uint8_t *gs_call_sync(grpc_channel *ch, const char *path, const uint8_t *req, size_t reqlen,
                      int deadline_ms, size_t *outlen, grpc_status_code *status, char *msg,
                      size_t msglen);

/* KEDA's order: GetMetricSpec for the metric name, then the GetMetricsRequest for ref, packed
 * (free()). NULL with a message in err. */
uint8_t *gs_metrics_request(grpc_channel *ch, Externalscaler__ScaledObjectRef *ref, int deadline_ms,
                            size_t *len, char *err, size_t errlen);

/* The value of the option at argv[*i], which it steps over: "-h"/"--help" prints usage on stdout
 * and exits 0; a missing value prints usage on stderr and gives NULL. */
const char *gs_opt_value(int argc, char **argv, int *i, void (*usage)(FILE *));

/* Percentiles over sorted v[0..n): the value at rank ceil(p/100 * n), 0 for n == 0. */
int gs_cmp_u32(const void *a, const void *b);
uint32_t gs_rank(const uint32_t *v, size_t n, double p);

/* ---- held-open StreamIsActive calls ---- */

struct gs_streams;
/* Called on the streams' thread for every message of stream i, with when it was read. */
typedef void (*gs_stream_msg_fn)(struct gs_streams *st, int i, grpc_byte_buffer *msg,
                                 int64_t now_ns);

struct gs_stream_tag {
  struct gs_stream *s;
  int kind;
};
struct gs_stream {
  int i;
  grpc_call *call;
  struct gs_stream_tag tags[3];
  grpc_metadata_array init_md, trailing_md;
  grpc_byte_buffer *recv;
  grpc_status_code status;
  grpc_slice details;
  bool got_msg, ended;
};

struct gs_streams {
  const char *prog; /* "gs_load": names the client in stderr lines */
  gs_stream_msg_fn on_msg;
  void *ud;
  int n, nch;
  grpc_channel **ch;
  grpc_completion_queue *cq;
  struct gs_stream *s;
  pthread_t thread;
  bool thread_started;
  atomic_long msgs;      /* messages received over all streams */
  atomic_int first_msgs; /* streams that received at least one message */
  atomic_int ended;      /* streams the server ended (before we cancelled them) */
  atomic_bool stopping;
  /* Optional: stream i carries mds[i % nmds] instead of the md given to gs_streams_open (many
   * distinct triggers over the streams). */
  const struct gs_md *mds;
  int nmds;
  grpc_status_code first_end; /* the first of those ends */
  char first_end_msg[256];
};

/* Opens st->n StreamIsActive calls to target, each sending the ScaledObjectRef (name, md), and
 * waits up to wait_s seconds until each has had its first message (the state at open) or ended.
 * Set prog, n, on_msg and ud first. Returns 0 when every stream had its first message and none
 * ended; GS_STREAMS_NOMEM when memory, a thread or a batch was refused (said on stderr); -1 when
 * some stream ended or had no message in time (the counts tell which: the caller says it).
 * Call gs_streams_close either way. */
#define GS_STREAMS_NOMEM (-2)
int gs_streams_open(struct gs_streams *st, const char *target, const char *name,
                    const struct gs_md *md, int wait_s);
/* Cancels every stream, waits up to wait_s seconds for their statuses and frees them. */
void gs_streams_close(struct gs_streams *st, int wait_s);

#endif
