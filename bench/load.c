/* gs_load: a closed-loop gRPC load client on C-core that measures unary-call latency and
 * throughput against gpuscale (KEDA's GetMetrics, or grpc.health.v1 Check as the transport
 * ceiling).
 *
 * Each client thread owns one channel (its own TCP connection) and one completion queue and keeps
 * its share of the --concurrency calls in flight; a call is started again as soon as one finishes.
 * Messages are protobuf-c from the gsproto library; calls are generic (method path + bytes), as in
 * src/rpc. Bounded by --calls and --max-seconds; loopback targets only by convention (run.sh). */
#include <errno.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "externalscaler.pb-c.h"
#include "health.pb-c.h"

#define MAX_THREADS 64
#define MAX_CONC 4096
#define MAX_MD 16
#define CALL_DEADLINE_MS 10000
#define MAX_STREAMS 20000
#define STREAMS_PER_CHANNEL 100 /* StreamIsActive calls per connection */

static const char m_spec[] = "/externalscaler.ExternalScaler/GetMetricSpec";
static const char m_metrics[] = "/externalscaler.ExternalScaler/GetMetrics";
static const char m_isactive[] = "/externalscaler.ExternalScaler/IsActive";
static const char m_check[] = "/grpc.health.v1.Health/Check";
static const char m_stream[] = "/externalscaler.ExternalScaler/StreamIsActive";

struct opts {
  const char *target;
  const char *method; /* getmetrics | isactive | health */
  int concurrency;
  int threads;
  long calls;
  double max_seconds;
  int streams;               /* StreamIsActive calls held open during the run (same metadata) */
  const char *write_request; /* write the framed request here and exit (for h2load) */
  size_t nmd;
  char *md_key[MAX_MD];
  char *md_val[MAX_MD];
};

/* One call slot: at most one call in flight per slot. */
struct slot {
  grpc_call *call;
  grpc_metadata_array init_md, trailing_md;
  grpc_byte_buffer *recv;
  grpc_status_code status;
  grpc_slice details;
  int64_t start_ns;
};

struct worker {
  int id, nslots;
  pthread_t thread;
  grpc_channel *ch;
  grpc_completion_queue *cq;
  struct slot *slots;
  uint32_t *lat_us; /* one entry per finished call */
  size_t nlat, caplat;
  long errors;
  grpc_status_code first_error;
  char first_error_msg[256];
};

static struct opts o;
static const char *method_path;
static uint8_t *payload;
static size_t payload_len;
static atomic_long issued;
static int64_t deadline_ns;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static gpr_timespec in_ms(int64_t ms) {
  return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

static grpc_channel *new_channel(void) {
  grpc_arg args[2];
  args[0].type = GRPC_ARG_INTEGER;
  args[0].key = (char *)GRPC_ARG_ENABLE_HTTP_PROXY;
  args[0].value.integer = 0;
  args[1].type = GRPC_ARG_INTEGER;
  args[1].key = (char *)GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL; /* one connection per channel */
  args[1].value.integer = 1;
  grpc_channel_args ca = {2, args};
  grpc_channel_credentials *creds = grpc_insecure_credentials_create();
  grpc_channel *ch = grpc_channel_create(o.target, creds, &ca);
  grpc_channel_credentials_release(creds);
  return ch;
}

static void finish_call(struct slot *s) {
  grpc_metadata_array_destroy(&s->init_md);
  grpc_metadata_array_destroy(&s->trailing_md);
  if (s->recv)
    grpc_byte_buffer_destroy(s->recv);
  s->recv = NULL;
  grpc_slice_unref(s->details);
  grpc_call_unref(s->call);
  s->call = NULL;
}

/* Starts one call on slot s. Returns 0, or -1 when grpc refused the batch. */
static int start_call(struct worker *w, struct slot *s) {
  grpc_slice method = grpc_slice_from_static_string(method_path);
  s->call = grpc_channel_create_call(w->ch, NULL, GRPC_PROPAGATE_DEFAULTS, w->cq, method, NULL,
                                     in_ms(CALL_DEADLINE_MS), NULL);
  grpc_metadata_array_init(&s->init_md);
  grpc_metadata_array_init(&s->trailing_md);
  s->recv = NULL;
  s->details = grpc_empty_slice();
  grpc_slice body = grpc_slice_from_static_buffer(payload, payload_len);
  grpc_byte_buffer *send = grpc_raw_byte_buffer_create(&body, 1);
  grpc_op ops[6];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = send;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &s->init_md;
  ops[4].op = GRPC_OP_RECV_MESSAGE;
  ops[4].data.recv_message.recv_message = &s->recv;
  ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[5].data.recv_status_on_client.trailing_metadata = &s->trailing_md;
  ops[5].data.recv_status_on_client.status = &s->status;
  ops[5].data.recv_status_on_client.status_details = &s->details;
  s->start_ns = now_ns();
  grpc_call_error e = grpc_call_start_batch(s->call, ops, 6, s, NULL);
  grpc_byte_buffer_destroy(send);
  if (e != GRPC_CALL_OK) {
    fprintf(stderr, "gs_load: grpc_call_start_batch: %d\n", (int)e);
    finish_call(s);
    return -1;
  }
  return 0;
}

/* Takes one call from the budget; false when the count or the time is used up. */
static bool take_budget(void) {
  if (now_ns() >= deadline_ns)
    return false;
  return atomic_fetch_add(&issued, 1) < o.calls;
}

static void *worker_main(void *arg) {
  struct worker *w = arg;
  int inflight = 0;
  for (int i = 0; i < w->nslots; i++) {
    if (!take_budget())
      break;
    if (start_call(w, &w->slots[i]) == 0)
      inflight++;
  }
  while (inflight > 0) {
    grpc_event ev = grpc_completion_queue_next(w->cq, in_ms(CALL_DEADLINE_MS + 5000), NULL);
    if (ev.type != GRPC_OP_COMPLETE) {
      fprintf(stderr, "gs_load: completion queue: unexpected event %d\n", (int)ev.type);
      break;
    }
    struct slot *s = ev.tag;
    int64_t us = (now_ns() - s->start_ns) / 1000;
    inflight--;
    if (!ev.success || s->status != GRPC_STATUS_OK) {
      if (w->errors++ == 0) {
        w->first_error = s->status;
        char *d = grpc_slice_to_c_string(s->details);
        snprintf(w->first_error_msg, sizeof w->first_error_msg, "%s", d);
        gpr_free(d);
      }
    } else if (w->nlat < w->caplat) {
      w->lat_us[w->nlat++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
    }
    finish_call(s);
    if (take_budget() && start_call(w, s) == 0)
      inflight++;
  }
  return NULL;
}

/* One blocking call on a private queue; returns the response bytes (free()) or NULL. */
static uint8_t *call_sync(grpc_channel *ch, const char *path, const uint8_t *req, size_t reqlen,
                          size_t *outlen, grpc_status_code *status, char *msg, size_t msglen) {
  grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
  struct slot s;
  memset(&s, 0, sizeof s);
  grpc_slice method = grpc_slice_from_copied_string(path);
  s.call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, method, NULL,
                                    in_ms(CALL_DEADLINE_MS), NULL);
  grpc_slice_unref(method);
  grpc_metadata_array_init(&s.init_md);
  grpc_metadata_array_init(&s.trailing_md);
  s.details = grpc_empty_slice();
  grpc_slice body = grpc_slice_from_copied_buffer((const char *)req, reqlen);
  grpc_byte_buffer *send = grpc_raw_byte_buffer_create(&body, 1);
  grpc_slice_unref(body);
  grpc_op ops[6];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = send;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &s.init_md;
  ops[4].op = GRPC_OP_RECV_MESSAGE;
  ops[4].data.recv_message.recv_message = &s.recv;
  ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[5].data.recv_status_on_client.trailing_metadata = &s.trailing_md;
  ops[5].data.recv_status_on_client.status = &s.status;
  ops[5].data.recv_status_on_client.status_details = &s.details;
  uint8_t *out = NULL;
  *outlen = 0;
  if (grpc_call_start_batch(s.call, ops, 6, &s, NULL) == GRPC_CALL_OK) {
    grpc_event ev = grpc_completion_queue_pluck(cq, &s, in_ms(CALL_DEADLINE_MS + 5000), NULL);
    *status = ev.type == GRPC_OP_COMPLETE ? s.status : GRPC_STATUS_DEADLINE_EXCEEDED;
    char *d = grpc_slice_to_c_string(s.details);
    snprintf(msg, msglen, "%s", d);
    gpr_free(d);
    if (ev.type == GRPC_OP_COMPLETE && s.status == GRPC_STATUS_OK && s.recv) {
      grpc_byte_buffer_reader r;
      if (grpc_byte_buffer_reader_init(&r, s.recv)) {
        grpc_slice all = grpc_byte_buffer_reader_readall(&r);
        grpc_byte_buffer_reader_destroy(&r);
        *outlen = GRPC_SLICE_LENGTH(all);
        out = malloc(*outlen ? *outlen : 1);
        if (out && *outlen)
          memcpy(out, GRPC_SLICE_START_PTR(all), *outlen);
        grpc_slice_unref(all);
      }
    }
  } else {
    *status = GRPC_STATUS_INTERNAL;
    snprintf(msg, msglen, "start_batch failed");
  }
  grpc_byte_buffer_destroy(send);
  finish_call(&s);
  grpc_completion_queue_shutdown(cq);
  while (grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
         GRPC_QUEUE_SHUTDOWN)
    ;
  grpc_completion_queue_destroy(cq);
  return out;
}

static uint8_t *pack(const ProtobufCMessage *m, size_t *len) {
  *len = protobuf_c_message_get_packed_size(m);
  uint8_t *p = malloc(*len ? *len : 1);
  if (p)
    protobuf_c_message_pack(m, p);
  return p;
}

/* The ScaledObjectRef that every ExternalScaler request carries. The caller frees *entries. */
static void make_ref(Externalscaler__ScaledObjectRef *ref,
                     Externalscaler__ScaledObjectRef__ScalerMetadataEntry *ents,
                     Externalscaler__ScaledObjectRef__ScalerMetadataEntry **ptrs) {
  externalscaler__scaled_object_ref__init(ref);
  ref->name = (char *)"gs-bench";
  ref->namespace_ = (char *)"default";
  for (size_t i = 0; i < o.nmd; i++) {
    externalscaler__scaled_object_ref__scaler_metadata_entry__init(&ents[i]);
    ents[i].key = o.md_key[i];
    ents[i].value = o.md_val[i];
    ptrs[i] = &ents[i];
  }
  ref->n_scalermetadata = o.nmd;
  ref->scalermetadata = ptrs;
}

/* Builds the request payload; for GetMetrics it first asks GetMetricSpec for the metric name, as
 * KEDA does. Returns 0 or -1 with a message on stderr. */
static int build_payload(grpc_channel *ch) {
  Externalscaler__ScaledObjectRef ref;
  Externalscaler__ScaledObjectRef__ScalerMetadataEntry ents[MAX_MD];
  Externalscaler__ScaledObjectRef__ScalerMetadataEntry *ptrs[MAX_MD];
  make_ref(&ref, ents, ptrs);
  grpc_status_code st;
  char msg[512];
  size_t n;
  if (strcmp(o.method, "health") == 0) {
    Grpc__Health__V1__HealthCheckRequest h = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
    method_path = m_check;
    payload = pack(&h.base, &payload_len);
  } else if (strcmp(o.method, "isactive") == 0) {
    method_path = m_isactive;
    payload = pack(&ref.base, &payload_len);
  } else {
    uint8_t *req = pack(&ref.base, &n);
    size_t rlen = 0;
    uint8_t *resp = req ? call_sync(ch, m_spec, req, n, &rlen, &st, msg, sizeof msg) : NULL;
    free(req);
    if (!resp) {
      fprintf(stderr, "gs_load: GetMetricSpec failed: status %d: %s\n", (int)st, msg);
      return -1;
    }
    Externalscaler__GetMetricSpecResponse *sr =
        externalscaler__get_metric_spec_response__unpack(NULL, rlen, resp);
    free(resp);
    if (!sr || sr->n_metricspecs < 1) {
      fprintf(stderr, "gs_load: GetMetricSpec answered no metric spec\n");
      if (sr)
        externalscaler__get_metric_spec_response__free_unpacked(sr, NULL);
      return -1;
    }
    Externalscaler__GetMetricsRequest gm = EXTERNALSCALER__GET_METRICS_REQUEST__INIT;
    gm.scaledobjectref = &ref;
    gm.metricname = sr->metricspecs[0]->metricname;
    method_path = m_metrics;
    payload = pack(&gm.base, &payload_len);
    externalscaler__get_metric_spec_response__free_unpacked(sr, NULL);
  }
  if (!payload) {
    fprintf(stderr, "gs_load: out of memory\n");
    return -1;
  }
  /* One checked call: the load must measure successful answers, not errors. */
  size_t rlen = 0;
  uint8_t *resp = call_sync(ch, method_path, payload, payload_len, &rlen, &st, msg, sizeof msg);
  if (!resp) {
    fprintf(stderr, "gs_load: %s failed: status %d: %s\n", method_path, (int)st, msg);
    return -1;
  }
  free(resp);
  return 0;
}

/* ---- held-open StreamIsActive calls: the load the server's stream ticker re-evaluates ---- */

enum { ST_START, ST_RECV, ST_STATUS };

struct stream;
struct stream_tag {
  struct stream *s;
  int kind;
};

struct stream {
  grpc_call *call;
  struct stream_tag tags[3];
  grpc_metadata_array init_md, trailing_md;
  grpc_byte_buffer *recv;
  grpc_status_code status;
  grpc_slice details;
  bool got_msg, ended;
};

static struct {
  int n;
  int nch;
  grpc_channel **ch;
  grpc_completion_queue *cq;
  struct stream *s;
  pthread_t thread;
  bool thread_started;
  atomic_long msgs;      /* messages received over all streams */
  atomic_int first_msgs; /* streams that received at least one message */
  atomic_int ended;      /* streams the server ended (before we cancelled them) */
  atomic_bool stopping;
  grpc_status_code first_end;
  char first_end_msg[256];
} st;

static bool post_recv(struct stream *s) {
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_RECV_MESSAGE;
  op.data.recv_message.recv_message = &s->recv;
  return grpc_call_start_batch(s->call, &op, 1, &s->tags[ST_RECV], NULL) == GRPC_CALL_OK;
}

/* Drains the streams' queue: counts messages, re-posts reads, notes ends, until shutdown. */
static void *streams_main(void *arg) {
  (void)arg;
  for (;;) {
    grpc_event ev = grpc_completion_queue_next(st.cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    if (ev.type == GRPC_QUEUE_SHUTDOWN)
      break;
    if (ev.type != GRPC_OP_COMPLETE)
      continue;
    struct stream_tag *t = ev.tag;
    struct stream *s = t->s;
    if (t->kind == ST_RECV) {
      if (ev.success && s->recv) {
        grpc_byte_buffer_destroy(s->recv);
        s->recv = NULL;
        atomic_fetch_add(&st.msgs, 1);
        if (!s->got_msg) {
          s->got_msg = true;
          atomic_fetch_add(&st.first_msgs, 1);
        }
        if (!post_recv(s))
          fprintf(stderr, "gs_load: stream: cannot post a read\n");
      }
    } else if (t->kind == ST_STATUS) {
      s->ended = true;
      if (!atomic_load(&st.stopping) && atomic_fetch_add(&st.ended, 1) == 0) {
        st.first_end = s->status;
        char *d = grpc_slice_to_c_string(s->details);
        snprintf(st.first_end_msg, sizeof st.first_end_msg, "%s", d);
        gpr_free(d);
      }
    }
  }
  return NULL;
}

/* Opens o.streams StreamIsActive calls carrying ref and waits (up to 10 s) until each has had
 * its first message, the state at open. Returns 0 or -1 with a message on stderr. */
static int streams_open(const uint8_t *ref, size_t reflen) {
  st.n = o.streams;
  st.nch = (st.n + STREAMS_PER_CHANNEL - 1) / STREAMS_PER_CHANNEL;
  st.ch = calloc((size_t)st.nch, sizeof *st.ch);
  st.s = calloc((size_t)st.n, sizeof *st.s);
  if (!st.ch || !st.s) {
    fprintf(stderr, "gs_load: out of memory\n");
    return -1;
  }
  st.cq = grpc_completion_queue_create_for_next(NULL);
  for (int c = 0; c < st.nch; c++)
    st.ch[c] = new_channel();
  if (pthread_create(&st.thread, NULL, streams_main, NULL) != 0) {
    fprintf(stderr, "gs_load: cannot start the stream thread\n");
    return -1;
  }
  st.thread_started = true;
  grpc_slice method = grpc_slice_from_static_string(m_stream);
  for (int i = 0; i < st.n; i++) {
    struct stream *s = &st.s[i];
    for (int k = 0; k < 3; k++)
      s->tags[k] = (struct stream_tag){s, k};
    s->call =
        grpc_channel_create_call(st.ch[i / STREAMS_PER_CHANNEL], NULL, GRPC_PROPAGATE_DEFAULTS,
                                 st.cq, method, NULL, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    grpc_metadata_array_init(&s->init_md);
    grpc_metadata_array_init(&s->trailing_md);
    s->details = grpc_empty_slice();
    grpc_slice body = grpc_slice_from_copied_buffer((const char *)ref, reflen);
    grpc_byte_buffer *send = grpc_raw_byte_buffer_create(&body, 1);
    grpc_slice_unref(body);
    grpc_op ops[4];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &s->init_md;
    grpc_op sop;
    memset(&sop, 0, sizeof sop);
    sop.op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    sop.data.recv_status_on_client.trailing_metadata = &s->trailing_md;
    sop.data.recv_status_on_client.status = &s->status;
    sop.data.recv_status_on_client.status_details = &s->details;
    bool ok = grpc_call_start_batch(s->call, ops, 4, &s->tags[ST_START], NULL) == GRPC_CALL_OK &&
              post_recv(s) &&
              grpc_call_start_batch(s->call, &sop, 1, &s->tags[ST_STATUS], NULL) == GRPC_CALL_OK;
    grpc_byte_buffer_destroy(send);
    if (!ok) {
      fprintf(stderr, "gs_load: cannot start stream %d\n", i);
      return -1;
    }
  }
  int64_t until = now_ns() + 10 * 1000000000LL;
  while (atomic_load(&st.first_msgs) + atomic_load(&st.ended) < st.n && now_ns() < until) {
    struct timespec ts = {0, 10 * 1000000L};
    nanosleep(&ts, NULL);
  }
  if (atomic_load(&st.ended) > 0) {
    fprintf(stderr, "gs_load: %d streams ended by the server, first: status %d: %s\n",
            atomic_load(&st.ended), (int)st.first_end, st.first_end_msg);
    return -1;
  }
  if (atomic_load(&st.first_msgs) < st.n) {
    fprintf(stderr, "gs_load: only %d of %d streams had their first message within 10s\n",
            atomic_load(&st.first_msgs), st.n);
    return -1;
  }
  return 0;
}

/* Cancels every stream, waits for their statuses and frees them. */
static void streams_close(void) {
  atomic_store(&st.stopping, true);
  for (int i = 0; st.s && i < st.n; i++)
    if (st.s[i].call)
      grpc_call_cancel(st.s[i].call, NULL);
  int64_t until = now_ns() + 10 * 1000000000LL;
  for (int i = 0; st.s && i < st.n && now_ns() < until; i++)
    while (st.s[i].call && !st.s[i].ended && now_ns() < until) {
      struct timespec ts = {0, 1000000L};
      nanosleep(&ts, NULL);
    }
  if (st.cq) {
    grpc_completion_queue_shutdown(st.cq);
    if (st.thread_started)
      pthread_join(st.thread, NULL);
    else
      while (grpc_completion_queue_next(st.cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
             GRPC_QUEUE_SHUTDOWN)
        ;
  }
  for (int i = 0; st.s && i < st.n; i++) {
    struct stream *s = &st.s[i];
    if (!s->call)
      continue;
    grpc_metadata_array_destroy(&s->init_md);
    grpc_metadata_array_destroy(&s->trailing_md);
    if (s->recv)
      grpc_byte_buffer_destroy(s->recv);
    grpc_slice_unref(s->details);
    grpc_call_unref(s->call);
  }
  if (st.cq)
    grpc_completion_queue_destroy(st.cq);
  for (int c = 0; st.ch && c < st.nch; c++)
    if (st.ch[c])
      grpc_channel_destroy(st.ch[c]);
  free(st.s);
  free(st.ch);
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

static uint32_t rank(const uint32_t *v, size_t n, double p) {
  if (n == 0)
    return 0;
  size_t r = (size_t)((p / 100.0) * (double)n + 0.999999);
  if (r < 1)
    r = 1;
  if (r > n)
    r = n;
  return v[r - 1];
}

/* The request as one gRPC length-prefixed message (flag 0 = uncompressed, 4-byte big-endian
 * length, the protobuf bytes): the body h2load sends with -d. Returns 0, or 1 with stderr. */
static int write_request(const char *path) {
  FILE *f = fopen(path, "wb");
  uint8_t hdr[5] = {0, (uint8_t)(payload_len >> 24), (uint8_t)(payload_len >> 16),
                    (uint8_t)(payload_len >> 8), (uint8_t)payload_len};
  bool ok = f && fwrite(hdr, 1, sizeof hdr, f) == sizeof hdr &&
            fwrite(payload, 1, payload_len, f) == payload_len;
  if (f && fclose(f) != 0)
    ok = false;
  if (!ok) {
    fprintf(stderr, "gs_load: cannot write %s: %s\n", path, strerror(errno));
    return 1;
  }
  printf("method=%s request=%s bytes=%zu path=%s\n", o.method, path, payload_len + 5, method_path);
  return 0;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: gs_load --target HOST:PORT [--method getmetrics|isactive|health]\n"
          "               [--concurrency N] [--threads T] [--calls N] [--max-seconds S]\n"
          "               [--streams N] [--write-request FILE] [-m key=value]...\n"
          "--streams N holds N StreamIsActive calls (same metadata) open during the run.\n"
          "--write-request FILE writes the request as a gRPC-framed body (h2load -d FILE) after\n"
          "one checked call, and exits without load.\n"
          "Prints one line: method=... concurrency=... calls=... errors=... seconds=... rps=...\n"
          "p50_us=... p99_us=... max_us=... [streams=N stream_msgs=M]\n");
}

static int parse_args(int argc, char **argv) {
  o.method = "getmetrics";
  o.concurrency = 1;
  o.calls = 10000;
  o.max_seconds = 10;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      exit(0);
    }
    if (!v) {
      usage(stderr);
      return -1;
    }
    i++;
    char *end = NULL;
    errno = 0;
    if (strcmp(a, "--target") == 0) {
      o.target = v;
    } else if (strcmp(a, "--method") == 0) {
      o.method = v;
    } else if (strcmp(a, "--concurrency") == 0) {
      o.concurrency = (int)strtol(v, &end, 10);
    } else if (strcmp(a, "--threads") == 0) {
      o.threads = (int)strtol(v, &end, 10);
    } else if (strcmp(a, "--calls") == 0) {
      o.calls = strtol(v, &end, 10);
    } else if (strcmp(a, "--max-seconds") == 0) {
      o.max_seconds = strtod(v, &end);
    } else if (strcmp(a, "--streams") == 0) {
      o.streams = (int)strtol(v, &end, 10);
    } else if (strcmp(a, "--write-request") == 0) {
      o.write_request = v;
    } else if (strcmp(a, "-m") == 0) {
      const char *eq = strchr(v, '=');
      if (!eq || o.nmd == MAX_MD) {
        fprintf(stderr, "gs_load: -m wants key=value (at most %d)\n", MAX_MD);
        return -1;
      }
      o.md_key[o.nmd] = strndup(v, (size_t)(eq - v));
      o.md_val[o.nmd] = strdup(eq + 1);
      o.nmd++;
    } else {
      fprintf(stderr, "gs_load: unknown option %s\n", a);
      usage(stderr);
      return -1;
    }
    if (end && (*end || errno)) {
      fprintf(stderr, "gs_load: bad number for %s: %s\n", a, v);
      return -1;
    }
  }
  if (!o.target || o.concurrency < 1 || o.concurrency > MAX_CONC || o.calls < 1 ||
      o.max_seconds <= 0 || o.streams < 0 || o.streams > MAX_STREAMS ||
      (strcmp(o.method, "getmetrics") && strcmp(o.method, "isactive") &&
       strcmp(o.method, "health"))) {
    usage(stderr);
    return -1;
  }
  if (o.threads <= 0)
    o.threads = o.concurrency < 2 ? o.concurrency : 2;
  if (o.threads > o.concurrency)
    o.threads = o.concurrency;
  if (o.threads > MAX_THREADS)
    o.threads = MAX_THREADS;
  return 0;
}

int main(int argc, char **argv) {
  if (parse_args(argc, argv) != 0)
    return 2;
  grpc_init();
  int rc = 1;
  struct worker *ws = calloc((size_t)o.threads, sizeof *ws);
  grpc_channel *probe = new_channel();
  if (!ws || build_payload(probe) != 0)
    goto out;
  if (o.write_request) {
    rc = write_request(o.write_request);
    goto out;
  }
  if (o.streams > 0) {
    Externalscaler__ScaledObjectRef ref;
    Externalscaler__ScaledObjectRef__ScalerMetadataEntry ents[MAX_MD];
    Externalscaler__ScaledObjectRef__ScalerMetadataEntry *ptrs[MAX_MD];
    make_ref(&ref, ents, ptrs);
    size_t reflen = 0;
    uint8_t *refb = pack(&ref.base, &reflen);
    int src = refb ? streams_open(refb, reflen) : -1;
    free(refb);
    if (src != 0)
      goto out;
  }
  long msgs_before = atomic_load(&st.msgs);

  size_t per = (size_t)o.calls; /* dynamic sharing: any worker may finish most calls */
  for (int t = 0; t < o.threads; t++) {
    struct worker *w = &ws[t];
    w->id = t;
    w->nslots = o.concurrency / o.threads + (t < o.concurrency % o.threads ? 1 : 0);
    w->slots = calloc((size_t)w->nslots, sizeof *w->slots);
    w->caplat = per;
    w->lat_us = malloc(per * sizeof *w->lat_us);
    w->ch = new_channel();
    w->cq = grpc_completion_queue_create_for_next(NULL);
    if (!w->slots || !w->lat_us) {
      fprintf(stderr, "gs_load: out of memory\n");
      goto out;
    }
  }
  int64_t t0 = now_ns();
  deadline_ns = t0 + (int64_t)(o.max_seconds * 1e9);
  for (int t = 0; t < o.threads; t++)
    pthread_create(&ws[t].thread, NULL, worker_main, &ws[t]);
  for (int t = 0; t < o.threads; t++)
    pthread_join(ws[t].thread, NULL);
  double secs = (double)(now_ns() - t0) / 1e9;

  size_t total = 0;
  long errors = 0;
  for (int t = 0; t < o.threads; t++) {
    total += ws[t].nlat;
    errors += ws[t].errors;
  }
  uint32_t *all = malloc((total ? total : 1) * sizeof *all);
  if (!all)
    goto out;
  size_t k = 0;
  for (int t = 0; t < o.threads; t++) {
    memcpy(all + k, ws[t].lat_us, ws[t].nlat * sizeof *all);
    k += ws[t].nlat;
  }
  qsort(all, total, sizeof *all, cmp_u32);
  printf("method=%s concurrency=%d threads=%d calls=%zu errors=%ld seconds=%.3f rps=%.0f "
         "p50_us=%" PRIu32 " p99_us=%" PRIu32 " max_us=%" PRIu32,
         o.method, o.concurrency, o.threads, total, errors, secs,
         secs > 0 ? (double)total / secs : 0.0, rank(all, total, 50), rank(all, total, 99),
         total ? all[total - 1] : 0);
  if (o.streams > 0) {
    int gone = atomic_load(&st.ended);
    printf(" streams=%d stream_msgs=%ld streams_ended=%d", o.streams,
           atomic_load(&st.msgs) - msgs_before, gone);
    if (gone) { /* a stream the server ended is an error: the figure would not be "N open" */
      fprintf(stderr, "gs_load: %d streams ended during the run, first: status %d: %s\n", gone,
              (int)st.first_end, st.first_end_msg);
      errors += gone;
    }
  }
  printf("\n");
  for (int t = 0; t < o.threads; t++)
    if (ws[t].errors) {
      fprintf(stderr, "gs_load: thread %d: %ld errors, first: status %d: %s\n", t, ws[t].errors,
              (int)ws[t].first_error, ws[t].first_error_msg);
      break;
    }
  free(all);
  rc = errors ? 1 : 0;

out:
  for (int t = 0; ws && t < o.threads; t++) {
    struct worker *w = &ws[t];
    if (w->cq) {
      grpc_completion_queue_shutdown(w->cq);
      while (grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
             GRPC_QUEUE_SHUTDOWN)
        ;
      grpc_completion_queue_destroy(w->cq);
    }
    if (w->ch)
      grpc_channel_destroy(w->ch);
    free(w->slots);
    free(w->lat_us);
  }
  free(ws);
  if (o.streams > 0)
    streams_close();
  if (probe)
    grpc_channel_destroy(probe);
  free(payload);
  for (size_t i = 0; i < o.nmd; i++) {
    free(o.md_key[i]);
    free(o.md_val[i]);
  }
  grpc_shutdown();
  return rc;
}
