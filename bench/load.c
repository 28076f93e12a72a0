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
#include "grpc_streams.h"
#include "health.pb-c.h"

#define MAX_THREADS 64
#define MAX_CONC 4096
#define CALL_DEADLINE_MS 10000

static const char m_isactive[] = "/externalscaler.ExternalScaler/IsActive";
static const char m_check[] = "/grpc.health.v1.Health/Check";

struct opts {
  const char *target;
  const char *method; /* getmetrics | isactive | health */
  int concurrency;
  int threads;
  long calls;
  double max_seconds;
  int streams;               /* StreamIsActive calls held open during the run (same metadata) */
  const char *write_request; /* write the framed request here and exit (for h2load) */
  struct gs_md md;
};

/* One call slot: at most one call in flight per slot. */
struct slot {
  struct gs_unary u;
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

/* Starts one call on slot s. Returns 0, or -1 when grpc refused the batch. */
static int start_call(struct worker *w, struct slot *s) {
  s->start_ns = gs_now_ns();
  if (gs_unary_start(&s->u, w->ch, w->cq, method_path, gs_in_ms(CALL_DEADLINE_MS),
                     grpc_slice_from_static_buffer(payload, payload_len), s) != 0) {
    fprintf(stderr, "gs_load: grpc_call_start_batch refused the call\n");
    return -1;
  }
  return 0;
}

/* Takes one call from the budget; false when the count or the time is used up. */
static bool take_budget(void) {
  if (gs_now_ns() >= deadline_ns)
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
    grpc_event ev = grpc_completion_queue_next(w->cq, gs_in_ms(CALL_DEADLINE_MS + 5000), NULL);
    if (ev.type != GRPC_OP_COMPLETE) {
      fprintf(stderr, "gs_load: completion queue: unexpected event %d\n", (int)ev.type);
      break;
    }
    struct slot *s = ev.tag;
    int64_t us = (gs_now_ns() - s->start_ns) / 1000;
    inflight--;
    if (!ev.success || s->u.status != GRPC_STATUS_OK) {
      if (w->errors++ == 0) {
        w->first_error = s->u.status;
        char *d = grpc_slice_to_c_string(s->u.details);
        snprintf(w->first_error_msg, sizeof w->first_error_msg, "%s", d);
        gpr_free(d);
      }
    } else if (w->nlat < w->caplat) {
      w->lat_us[w->nlat++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
    }
    gs_unary_done(&s->u);
    if (take_budget() && start_call(w, s) == 0)
      inflight++;
  }
  return NULL;
}

/* Builds the request payload; for GetMetrics it first asks GetMetricSpec for the metric name, as
 * KEDA does. Returns 0 or -1 with a message on stderr. */
static int build_payload(grpc_channel *ch) {
  Externalscaler__ScaledObjectRef ref;
  Externalscaler__ScaledObjectRef__ScalerMetadataEntry ents[GS_MAX_MD];
  Externalscaler__ScaledObjectRef__ScalerMetadataEntry *ptrs[GS_MAX_MD];
  gs_make_ref(&ref, ents, ptrs, "gs-bench", &o.md);
  grpc_status_code st;
  char msg[512];
  if (strcmp(o.method, "health") == 0) {
    Grpc__Health__V1__HealthCheckRequest h = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
    method_path = m_check;
    payload = gs_pack(&h.base, &payload_len);
  } else if (strcmp(o.method, "isactive") == 0) {
    method_path = m_isactive;
    payload = gs_pack(&ref.base, &payload_len);
  } else {
    method_path = gs_m_metrics;
    payload = gs_metrics_request(ch, &ref, CALL_DEADLINE_MS, &payload_len, msg, sizeof msg);
    if (!payload) {
      fprintf(stderr, "gs_load: %s\n", msg);
      return -1;
    }
  }
  if (!payload) {
    fprintf(stderr, "gs_load: out of memory\n");
    return -1;
  }
  /* One checked call: the load must measure successful answers, not errors. */
  size_t rlen = 0;
  uint8_t *resp = gs_call_sync(ch, method_path, payload, payload_len, CALL_DEADLINE_MS, &rlen, &st,
                               msg, sizeof msg);
  if (!resp) {
    fprintf(stderr, "gs_load: %s failed: status %d: %s\n", method_path, (int)st, msg);
    return -1;
  }
  free(resp);
  return 0;
}

/* ---- held-open StreamIsActive calls: the load the server's stream ticker re-evaluates ---- */

static struct gs_streams st = {.prog = "gs_load"};

/* Opens o.streams StreamIsActive calls carrying the run's ScaledObjectRef and waits (up to 10 s)
 * until each has had its first message, the state at open. Returns 0 or -1 with stderr. */
static int open_streams(void) {
  st.n = o.streams;
  int rc = gs_streams_open(&st, o.target, "gs-bench", &o.md, 10);
  if (rc == 0 || rc == GS_STREAMS_NOMEM)
    return rc;
  if (atomic_load(&st.ended) > 0)
    fprintf(stderr, "gs_load: %d streams ended by the server, first: status %d: %s\n",
            atomic_load(&st.ended), (int)st.first_end, st.first_end_msg);
  else if (atomic_load(&st.first_msgs) < st.n)
    fprintf(stderr, "gs_load: only %d of %d streams had their first message within 10s\n",
            atomic_load(&st.first_msgs), st.n);
  return -1;
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
    const char *a = argv[i], *v = gs_opt_value(argc, argv, &i, usage);
    if (!v)
      return -1;
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
      if (gs_md_add(&o.md, v) != 0) {
        fprintf(stderr, "gs_load: -m wants key=value (at most %d)\n", GS_MAX_MD);
        return -1;
      }
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
      o.max_seconds <= 0 || o.streams < 0 || o.streams > GS_MAX_STREAMS ||
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
  grpc_channel *probe = gs_channel(o.target);
  if (!ws || build_payload(probe) != 0)
    goto out;
  if (o.write_request) {
    rc = write_request(o.write_request);
    goto out;
  }
  if (o.streams > 0 && open_streams() != 0)
    goto out;
  long msgs_before = atomic_load(&st.msgs);

  size_t per = (size_t)o.calls; /* dynamic sharing: any worker may finish most calls */
  for (int t = 0; t < o.threads; t++) {
    struct worker *w = &ws[t];
    w->id = t;
    w->nslots = o.concurrency / o.threads + (t < o.concurrency % o.threads ? 1 : 0);
    w->slots = calloc((size_t)w->nslots, sizeof *w->slots);
    w->caplat = per;
    w->lat_us = malloc(per * sizeof *w->lat_us);
    w->ch = gs_channel(o.target);
    w->cq = grpc_completion_queue_create_for_next(NULL);
    if (!w->slots || !w->lat_us) {
      fprintf(stderr, "gs_load: out of memory\n");
      goto out;
    }
  }
  int64_t t0 = gs_now_ns();
  deadline_ns = t0 + (int64_t)(o.max_seconds * 1e9);
  for (int t = 0; t < o.threads; t++)
    pthread_create(&ws[t].thread, NULL, worker_main, &ws[t]);
  for (int t = 0; t < o.threads; t++)
    pthread_join(ws[t].thread, NULL);
  double secs = (double)(gs_now_ns() - t0) / 1e9;

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
  qsort(all, total, sizeof *all, gs_cmp_u32);
  printf("method=%s concurrency=%d threads=%d calls=%zu errors=%ld seconds=%.3f rps=%.0f "
         "p50_us=%" PRIu32 " p99_us=%" PRIu32 " max_us=%" PRIu32,
         o.method, o.concurrency, o.threads, total, errors, secs,
         secs > 0 ? (double)total / secs : 0.0, gs_rank(all, total, 50), gs_rank(all, total, 99),
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
    gs_streams_close(&st, 10);
  if (probe)
    grpc_channel_destroy(probe);
  free(payload);
  gs_md_free(&o.md);
  grpc_shutdown();
  return rc;
}
