/* gs_soak: an open-loop gRPC client on C-core for the soak and the many-streams benchmarks
 * (bench/soak.sh, bench/streams.sh, docs/bench.md).
 *
 * - GetMetrics at a steady --rate (calls per second, started on a fixed schedule whatever the
 *   answers do: open loop). Latency is measured from the scheduled start, so a stall shows as
 *   latency rather than as fewer calls (no coordinated omission). Percentiles per --window.
 * - Optionally --streams N StreamIsActive calls held open (100 per connection), and one activity
 *   transition: --flip-after S seconds into the run, --flip-cmd CMD is run (the caller swaps the
 *   mock scenario and sends SIGHUP), and for each stream the time from the flip to its first
 *   `true` is the push latency.
 *
 * Bounded by --seconds; loopback targets only by convention (the scripts). Prints lines of
 * key=value (see usage()). Exit status 1 when any call failed or a stream missed the push. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
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

#define MAX_MD 16
#define MAX_INFLIGHT 4096 /* a 4 s stall at 1000/s still finds a free slot */
#define MAX_STREAMS 20000
#define STREAMS_PER_CHANNEL 100
#define CALL_DEADLINE_MS 10000
#define LAT_FAILED UINT32_MAX        /* the call failed (status, deadline) */
#define LAT_SKIPPED (UINT32_MAX - 1) /* never started: every slot was busy */

static const char m_spec[] = "/externalscaler.ExternalScaler/GetMetricSpec";
static const char m_metrics[] = "/externalscaler.ExternalScaler/GetMetrics";
static const char m_stream[] = "/externalscaler.ExternalScaler/StreamIsActive";

static struct {
  const char *target;
  double rate, seconds, window, flip_after;
  int streams;
  const char *flip_cmd, *ready_file;
  size_t nmd;
  char *md_key[MAX_MD], *md_val[MAX_MD];
} o;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static gpr_timespec at_ns(int64_t t) {
  return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                      gpr_time_from_nanos(t > now_ns() ? t - now_ns() : 0, GPR_TIMESPAN));
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

static uint8_t *pack(const ProtobufCMessage *m, size_t *len) {
  *len = protobuf_c_message_get_packed_size(m);
  uint8_t *p = malloc(*len ? *len : 1);
  if (p)
    protobuf_c_message_pack(m, p);
  return p;
}

static void make_ref(Externalscaler__ScaledObjectRef *ref,
                     Externalscaler__ScaledObjectRef__ScalerMetadataEntry *ents,
                     Externalscaler__ScaledObjectRef__ScalerMetadataEntry **ptrs) {
  externalscaler__scaled_object_ref__init(ref);
  ref->name = (char *)"gs-soak";
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

/* ---- one unary call, the slot it runs in ---------------------------------------------------- */

struct slot {
  grpc_call *call;
  grpc_metadata_array init_md, trailing_md;
  grpc_byte_buffer *recv;
  grpc_status_code status;
  grpc_slice details;
  long k; /* the call's number in the schedule */
};

static void slot_done(struct slot *s) {
  grpc_metadata_array_destroy(&s->init_md);
  grpc_metadata_array_destroy(&s->trailing_md);
  if (s->recv)
    grpc_byte_buffer_destroy(s->recv);
  s->recv = NULL;
  grpc_slice_unref(s->details);
  grpc_call_unref(s->call);
  s->call = NULL;
}

static int slot_start(struct slot *s, grpc_channel *ch, grpc_completion_queue *cq, const char *path,
                      const uint8_t *req, size_t reqlen) {
  s->call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                                     grpc_slice_from_static_string(path), NULL,
                                     at_ns(now_ns() + CALL_DEADLINE_MS * 1000000LL), NULL);
  grpc_metadata_array_init(&s->init_md);
  grpc_metadata_array_init(&s->trailing_md);
  s->recv = NULL;
  s->details = grpc_empty_slice();
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
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &s->init_md;
  ops[4].op = GRPC_OP_RECV_MESSAGE;
  ops[4].data.recv_message.recv_message = &s->recv;
  ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[5].data.recv_status_on_client.trailing_metadata = &s->trailing_md;
  ops[5].data.recv_status_on_client.status = &s->status;
  ops[5].data.recv_status_on_client.status_details = &s->details;
  grpc_call_error e = grpc_call_start_batch(s->call, ops, 6, s, NULL);
  grpc_byte_buffer_destroy(send);
  if (e != GRPC_CALL_OK) {
    slot_done(s);
    return -1;
  }
  return 0;
}

/* One blocking call; returns the response bytes (free()) or NULL with a message on stderr. */
static uint8_t *call_sync(grpc_channel *ch, const char *path, const uint8_t *req, size_t reqlen,
                          size_t *outlen) {
  grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
  struct slot s;
  memset(&s, 0, sizeof s);
  uint8_t *out = NULL;
  *outlen = 0;
  if (slot_start(&s, ch, cq, path, req, reqlen) != 0) {
    fprintf(stderr, "gs_soak: %s: cannot start the call\n", path);
  } else {
    grpc_event ev = grpc_completion_queue_next(
        cq, at_ns(now_ns() + (CALL_DEADLINE_MS + 5000) * 1000000LL), NULL);
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
    } else {
      char *d = grpc_slice_to_c_string(s.details);
      fprintf(stderr, "gs_soak: %s: status %d: %s\n", path, (int)s.status, d);
      gpr_free(d);
    }
    slot_done(&s);
  }
  grpc_completion_queue_shutdown(cq);
  while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
         GRPC_QUEUE_SHUTDOWN)
    ;
  grpc_completion_queue_destroy(cq);
  return out;
}

/* GetMetricSpec for the metric name, as KEDA does, then the GetMetrics request; one checked call.
 */
static uint8_t *build_request(grpc_channel *ch, size_t *len) {
  Externalscaler__ScaledObjectRef ref;
  Externalscaler__ScaledObjectRef__ScalerMetadataEntry ents[MAX_MD];
  Externalscaler__ScaledObjectRef__ScalerMetadataEntry *ptrs[MAX_MD];
  make_ref(&ref, ents, ptrs);
  size_t n = 0, rlen = 0;
  uint8_t *req = pack(&ref.base, &n);
  uint8_t *resp = req ? call_sync(ch, m_spec, req, n, &rlen) : NULL;
  free(req);
  if (!resp)
    return NULL;
  Externalscaler__GetMetricSpecResponse *sr =
      externalscaler__get_metric_spec_response__unpack(NULL, rlen, resp);
  free(resp);
  if (!sr || sr->n_metricspecs < 1) {
    fprintf(stderr, "gs_soak: GetMetricSpec answered no metric spec\n");
    if (sr)
      externalscaler__get_metric_spec_response__free_unpacked(sr, NULL);
    return NULL;
  }
  Externalscaler__GetMetricsRequest gm = EXTERNALSCALER__GET_METRICS_REQUEST__INIT;
  gm.scaledobjectref = &ref;
  gm.metricname = sr->metricspecs[0]->metricname;
  uint8_t *p = pack(&gm.base, len);
  externalscaler__get_metric_spec_response__free_unpacked(sr, NULL);
  resp = p ? call_sync(ch, m_metrics, p, *len, &rlen) : NULL;
  if (!resp) {
    free(p);
    return NULL;
  }
  free(resp);
  return p;
}

/* ---- held-open streams and the push at the flip --------------------------------------------- */

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
  int64_t push_ns; /* first true after the flip, from the flip; 0 = none yet */
};

static struct {
  int n, nch;
  grpc_channel **ch;
  grpc_completion_queue *cq;
  struct stream *s;
  pthread_t thread;
  bool thread_started;
  atomic_int first_msgs, ended, pushed, early_true;
  atomic_bool stopping;
  atomic_llong flip_ns; /* when the flip command started; 0 = not yet */
} st;

static bool post_recv(struct stream *s) {
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_RECV_MESSAGE;
  op.data.recv_message.recv_message = &s->recv;
  return grpc_call_start_batch(s->call, &op, 1, &s->tags[ST_RECV], NULL) == GRPC_CALL_OK;
}

/* The result field of one IsActiveResponse; -1 when it does not decode. */
static int decode_result(grpc_byte_buffer *b) {
  grpc_byte_buffer_reader r;
  if (!grpc_byte_buffer_reader_init(&r, b))
    return -1;
  grpc_slice all = grpc_byte_buffer_reader_readall(&r);
  grpc_byte_buffer_reader_destroy(&r);
  Externalscaler__IsActiveResponse *m = externalscaler__is_active_response__unpack(
      NULL, GRPC_SLICE_LENGTH(all), GRPC_SLICE_START_PTR(all));
  grpc_slice_unref(all);
  if (!m)
    return -1;
  int v = m->result ? 1 : 0;
  externalscaler__is_active_response__free_unpacked(m, NULL);
  return v;
}

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
    if (t->kind == ST_RECV && ev.success && s->recv) {
      int64_t now = now_ns();
      int v = decode_result(s->recv);
      grpc_byte_buffer_destroy(s->recv);
      s->recv = NULL;
      int64_t flip = atomic_load(&st.flip_ns);
      if (v == 1 && flip == 0)
        atomic_fetch_add(&st.early_true, 1); /* active before the load arrived: a wrong push */
      if (v == 1 && flip > 0 && s->push_ns == 0) {
        s->push_ns = now - flip > 0 ? now - flip : 1;
        atomic_fetch_add(&st.pushed, 1);
      }
      if (!s->got_msg) {
        s->got_msg = true;
        atomic_fetch_add(&st.first_msgs, 1);
      }
      if (!post_recv(s))
        fprintf(stderr, "gs_soak: stream: cannot post a read\n");
    } else if (t->kind == ST_STATUS) {
      s->ended = true;
      if (!atomic_load(&st.stopping))
        atomic_fetch_add(&st.ended, 1);
    }
  }
  return NULL;
}

static int streams_open(const uint8_t *ref, size_t reflen) {
  st.n = o.streams;
  st.nch = (st.n + STREAMS_PER_CHANNEL - 1) / STREAMS_PER_CHANNEL;
  st.ch = calloc((size_t)st.nch, sizeof *st.ch);
  st.s = calloc((size_t)st.n, sizeof *st.s);
  st.cq = grpc_completion_queue_create_for_next(NULL);
  if (!st.ch || !st.s || pthread_create(&st.thread, NULL, streams_main, NULL) != 0) {
    fprintf(stderr, "gs_soak: out of memory or threads\n");
    return -1;
  }
  st.thread_started = true;
  for (int c = 0; c < st.nch; c++)
    st.ch[c] = new_channel();
  for (int i = 0; i < st.n; i++) {
    struct stream *s = &st.s[i];
    for (int k = 0; k < 3; k++)
      s->tags[k] = (struct stream_tag){s, k};
    s->call = grpc_channel_create_call(
        st.ch[i / STREAMS_PER_CHANNEL], NULL, GRPC_PROPAGATE_DEFAULTS, st.cq,
        grpc_slice_from_static_string(m_stream), NULL, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
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
      fprintf(stderr, "gs_soak: cannot start stream %d\n", i);
      return -1;
    }
  }
  int64_t until = now_ns() + 60 * 1000000000LL;
  while (atomic_load(&st.first_msgs) + atomic_load(&st.ended) < st.n && now_ns() < until) {
    struct timespec ts = {0, 10 * 1000000L};
    nanosleep(&ts, NULL);
  }
  if (atomic_load(&st.ended) > 0 || atomic_load(&st.first_msgs) < st.n) {
    fprintf(stderr, "gs_soak: %d of %d streams had their first message within 60 s, %d ended\n",
            atomic_load(&st.first_msgs), st.n, atomic_load(&st.ended));
    return -1;
  }
  return 0;
}

static void streams_close(void) {
  atomic_store(&st.stopping, true);
  for (int i = 0; st.s && i < st.n; i++)
    if (st.s[i].call)
      grpc_call_cancel(st.s[i].call, NULL);
  int64_t until = now_ns() + 20 * 1000000000LL;
  for (int i = 0; st.s && i < st.n && now_ns() < until; i++)
    while (st.s[i].call && !st.s[i].ended && now_ns() < until) {
      struct timespec ts = {0, 1000000L};
      nanosleep(&ts, NULL);
    }
  if (st.cq) {
    grpc_completion_queue_shutdown(st.cq);
    if (st.thread_started)
      pthread_join(st.thread, NULL);
    grpc_completion_queue_destroy(st.cq);
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
  for (int c = 0; st.ch && c < st.nch; c++)
    if (st.ch[c])
      grpc_channel_destroy(st.ch[c]);
  free(st.s);
  free(st.ch);
}

static void *flip_main(void *arg) {
  (void)arg;
  atomic_store(&st.flip_ns, (long long)now_ns());
  int rc = system(o.flip_cmd);
  if (rc != 0)
    fprintf(stderr, "gs_soak: --flip-cmd exited with %d\n", rc);
  return NULL;
}

/* ---- figures -------------------------------------------------------------------------------- */

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

static uint32_t rank(const uint32_t *v, size_t n, double p) {
  if (n == 0)
    return 0;
  size_t r = (size_t)((p / 100.0) * (double)n + 0.999999);
  r = r < 1 ? 1 : r > n ? n : r;
  return v[r - 1];
}

/* Prints "PREFIX calls=N errors=E p50_us=.. p99_us=.. p999_us=.. max_us=.." for lat[0..n). */
static void print_pct(const char *prefix, const uint32_t *lat, size_t n) {
  uint32_t *v = malloc((n ? n : 1) * sizeof *v);
  size_t k = 0, errors = 0, skipped = 0;
  for (size_t i = 0; v && i < n; i++) {
    if (lat[i] == LAT_FAILED)
      errors++;
    else if (lat[i] == LAT_SKIPPED)
      skipped++;
    else
      v[k++] = lat[i];
  }
  if (!v)
    return;
  qsort(v, k, sizeof *v, cmp_u32);
  printf("%s calls=%zu errors=%zu skipped=%zu p50_us=%" PRIu32 " p99_us=%" PRIu32
         " p999_us=%" PRIu32 " max_us=%" PRIu32 "\n",
         prefix, k, errors, skipped, rank(v, k, 50), rank(v, k, 99), rank(v, k, 99.9),
         k ? v[k - 1] : 0);
  free(v);
}

static void usage(FILE *f) {
  fprintf(f, "usage: gs_soak --target HOST:PORT [--rate R] [--seconds S] [--window W]\n"
             "               [--streams N [--ready-file F] --flip-after S --flip-cmd CMD]\n"
             "               [-m key=value]...\n"
             "Prints 'window=I start_s=.. calls=.. errors=.. p50_us=.. p99_us=.. p999_us=.. "
             "max_us=..'\nper window, 'total ...' and with streams 'push streams=N pushed=K "
             "p50_us=.. p99_us=.. max_us=..'.\n");
}

static int parse_args(int argc, char **argv) {
  o.rate = 1000;
  o.seconds = 10;
  o.window = 300;
  o.flip_after = -1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
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
    if (!strcmp(a, "--target"))
      o.target = v;
    else if (!strcmp(a, "--rate"))
      o.rate = strtod(v, &end);
    else if (!strcmp(a, "--seconds"))
      o.seconds = strtod(v, &end);
    else if (!strcmp(a, "--window"))
      o.window = strtod(v, &end);
    else if (!strcmp(a, "--flip-after"))
      o.flip_after = strtod(v, &end);
    else if (!strcmp(a, "--streams"))
      o.streams = (int)strtol(v, &end, 10);
    else if (!strcmp(a, "--flip-cmd"))
      o.flip_cmd = v;
    else if (!strcmp(a, "--ready-file"))
      o.ready_file = v;
    else if (!strcmp(a, "-m")) {
      const char *eq = strchr(v, '=');
      if (!eq || o.nmd == MAX_MD) {
        fprintf(stderr, "gs_soak: -m wants key=value (at most %d)\n", MAX_MD);
        return -1;
      }
      o.md_key[o.nmd] = strndup(v, (size_t)(eq - v));
      o.md_val[o.nmd] = strdup(eq + 1);
      o.nmd++;
    } else {
      fprintf(stderr, "gs_soak: unknown option %s\n", a);
      return -1;
    }
    if (end && (*end || errno)) {
      fprintf(stderr, "gs_soak: bad number for %s: %s\n", a, v);
      return -1;
    }
  }
  if (!o.target || o.rate <= 0 || o.rate > 100000 || o.seconds <= 0 || o.seconds > 86400 ||
      o.window <= 0 || o.streams < 0 || o.streams > MAX_STREAMS ||
      (o.flip_cmd && (o.streams == 0 || o.flip_after < 0 || o.flip_after >= o.seconds))) {
    usage(stderr);
    return -1;
  }
  return 0;
}

/* The paced run: call k is due at t0 + k / rate; up to MAX_INFLIGHT in flight. A call that finds
 * no free slot is counted skipped, apart from failures (the client and server are that far behind:
 * a stall of the shared machine). Only failed calls make the exit status 1. */
static int paced(grpc_channel *ch, const uint8_t *req, size_t reqlen) {
  long total = (long)(o.rate * o.seconds);
  uint32_t *lat = malloc((size_t)total * sizeof *lat);
  struct slot *slots = calloc(MAX_INFLIGHT, sizeof *slots);
  int *freel = malloc(MAX_INFLIGHT * sizeof *freel);
  grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
  if (!lat || !slots || !freel) {
    fprintf(stderr, "gs_soak: out of memory\n");
    return -1;
  }
  for (long k = 0; k < total; k++)
    lat[k] = LAT_SKIPPED;
  int nfree = MAX_INFLIGHT;
  for (int i = 0; i < MAX_INFLIGHT; i++)
    freel[i] = i;
  int64_t t0 = now_ns() + 10000000LL, period = (int64_t)(1e9 / o.rate);
  long next = 0;
  bool flipped = o.flip_cmd == NULL;
  pthread_t flipper;
  while (next < total || nfree < MAX_INFLIGHT) {
    int64_t now = now_ns();
    if (!flipped && now >= t0 + (int64_t)(o.flip_after * 1e9)) {
      flipped = pthread_create(&flipper, NULL, flip_main, NULL) == 0;
      if (!flipped) {
        fprintf(stderr, "gs_soak: cannot start the flip thread\n");
        flipped = true;
        o.flip_cmd = NULL;
      }
    }
    while (next < total && now >= t0 + next * period) {
      if (nfree > 0) {
        struct slot *s = &slots[freel[--nfree]];
        s->k = next;
        if (slot_start(s, ch, cq, m_metrics, req, reqlen) != 0) {
          lat[next] = LAT_FAILED;
          freel[nfree++] = (int)(s - slots);
        }
      }
      next++;
    }
    int64_t due = next < total ? t0 + next * period : now + 1000000000LL;
    grpc_event ev = grpc_completion_queue_next(cq, at_ns(due), NULL);
    if (ev.type != GRPC_OP_COMPLETE)
      continue;
    struct slot *s = ev.tag;
    if (ev.success && s->status == GRPC_STATUS_OK) {
      int64_t us = (now_ns() - (t0 + s->k * period)) / 1000;
      lat[s->k] = us >= LAT_SKIPPED ? LAT_SKIPPED - 1 : (uint32_t)us;
    } else {
      lat[s->k] = LAT_FAILED;
    }
    slot_done(s);
    freel[nfree++] = (int)(s - slots);
  }
  if (o.flip_cmd && flipped)
    pthread_join(flipper, NULL);
  long per = (long)(o.rate * o.window);
  char prefix[64];
  for (long w = 0; w * per < total; w++) {
    long n = total - w * per < per ? total - w * per : per;
    snprintf(prefix, sizeof prefix, "window=%ld start_s=%.0f", w + 1, (double)w * o.window);
    print_pct(prefix, lat + w * per, (size_t)n);
  }
  size_t errors = 0;
  for (long k = 0; k < total; k++)
    errors += lat[k] == LAT_FAILED;
  printf("total rate=%.0f seconds=%.0f", o.rate, o.seconds);
  print_pct("", lat, (size_t)total);
  grpc_completion_queue_shutdown(cq);
  while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
         GRPC_QUEUE_SHUTDOWN)
    ;
  grpc_completion_queue_destroy(cq);
  free(lat);
  free(slots);
  free(freel);
  return errors ? 1 : 0;
}

static int report_push(void) {
  uint32_t *v = malloc((size_t)st.n * sizeof *v);
  size_t k = 0;
  for (int i = 0; v && i < st.n; i++)
    if (st.s[i].push_ns > 0)
      v[k++] =
          (uint32_t)(st.s[i].push_ns / 1000 > UINT32_MAX ? UINT32_MAX : st.s[i].push_ns / 1000);
  if (!v)
    return 1;
  qsort(v, k, sizeof *v, cmp_u32);
  printf("push streams=%d pushed=%zu early_true=%d ended=%d p50_us=%" PRIu32 " p99_us=%" PRIu32
         " min_us=%" PRIu32 " max_us=%" PRIu32 "\n",
         st.n, k, atomic_load(&st.early_true), atomic_load(&st.ended), rank(v, k, 50),
         rank(v, k, 99), k ? v[0] : 0, k ? v[k - 1] : 0);
  free(v);
  return (int)k == st.n && atomic_load(&st.early_true) == 0 && atomic_load(&st.ended) == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
  if (parse_args(argc, argv) != 0)
    return 2;
  grpc_init();
  int rc = 1;
  grpc_channel *ch = new_channel();
  size_t reqlen = 0;
  uint8_t *req = build_request(ch, &reqlen);
  if (!req)
    goto out;
  if (o.streams > 0) {
    Externalscaler__ScaledObjectRef ref;
    Externalscaler__ScaledObjectRef__ScalerMetadataEntry ents[MAX_MD];
    Externalscaler__ScaledObjectRef__ScalerMetadataEntry *ptrs[MAX_MD];
    make_ref(&ref, ents, ptrs);
    size_t reflen = 0;
    uint8_t *refb = pack(&ref.base, &reflen);
    int64_t t = now_ns();
    int src = refb ? streams_open(refb, reflen) : -1;
    free(refb);
    if (src != 0)
      goto out;
    printf("streams=%d open_ms=%.0f\n", st.n, (double)(now_ns() - t) / 1e6);
    fflush(stdout);
    if (o.ready_file) {
      FILE *f = fopen(o.ready_file, "w");
      if (f)
        fclose(f);
    }
  }
  rc = paced(ch, req, reqlen);
  if (o.flip_cmd && report_push() != 0)
    rc = 1;
out:
  if (o.streams > 0)
    streams_close();
  grpc_channel_destroy(ch);
  free(req);
  for (size_t i = 0; i < o.nmd; i++) {
    free(o.md_key[i]);
    free(o.md_val[i]);
  }
  grpc_shutdown();
  return rc;
}
