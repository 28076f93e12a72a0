/* gs_soak: an open-loop gRPC client on C-core for the soak and the many-streams benchmarks
 * (bench/soak.sh, bench/streams.sh, docs/bench.md).
 *
 * - GetMetrics at a steady --rate (calls per second, started on a fixed schedule whatever the
 *   answers do: open loop). Latency is measured from the scheduled start, so a stall shows as
 *   latency rather than as fewer calls (no coordinated omission). Percentiles per --window.
 * - Optionally --streams N StreamIsActive calls held open (100 per connection), and one activity
 *   transition: --flip-after S seconds into the run, --flip-cmd CMD is run (the caller swaps the
 *   mock scenario and sends SIGHUP), and for each stream the time from the flip to its first
 *   `true` is the push latency. --sent-file F (the simulated agents' stdout) times it from the
 *   first changed update they sent too (report_push_from_updates).
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
#include "grpc_streams.h"

#define MAX_INFLIGHT 4096 /* a 4 s stall at 1000/s still finds a free slot */
#define CALL_DEADLINE_MS 10000
#define LAT_FAILED UINT32_MAX        /* the call failed (status, deadline) */
#define LAT_SKIPPED (UINT32_MAX - 1) /* never started: every slot was busy */

static struct {
  const char *target;
  double rate, seconds, window, flip_after;
  int streams;
  const char *flip_cmd, *ready_file, *sent_file;
  struct gs_md md;
  int mix, mix_nodes; /* --mix K: K distinct triggers over the streams (see mix_triggers) */
} o;

static gpr_timespec at_ns(int64_t t) {
  int64_t now = gs_now_ns();
  return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                      gpr_time_from_nanos(t > now ? t - now : 0, GPR_TIMESPAN));
}

/* ---- one unary call, the slot it runs in ---------------------------------------------------- */

struct slot {
  struct gs_unary u;
  long k; /* the call's number in the schedule */
};

/* The GetMetrics request (GetMetricSpec first for the metric name, as KEDA does), after one
 * checked call. NULL with a message on stderr. */
static uint8_t *build_request(grpc_channel *ch, size_t *len) {
  Externalscaler__ScaledObjectRef ref;
  Externalscaler__ScaledObjectRef__ScalerMetadataEntry ents[GS_MAX_MD];
  Externalscaler__ScaledObjectRef__ScalerMetadataEntry *ptrs[GS_MAX_MD];
  gs_make_ref(&ref, ents, ptrs, "gs-soak", &o.md);
  char msg[512];
  uint8_t *p = gs_metrics_request(ch, &ref, CALL_DEADLINE_MS, len, msg, sizeof msg);
  if (!p) {
    fprintf(stderr, "gs_soak: %s\n", msg);
    return NULL;
  }
  size_t rlen = 0;
  grpc_status_code status;
  uint8_t *resp =
      gs_call_sync(ch, gs_m_metrics, p, *len, CALL_DEADLINE_MS, &rlen, &status, msg, sizeof msg);
  if (!resp) {
    fprintf(stderr, "gs_soak: %s: status %d: %s\n", gs_m_metrics, (int)status, msg);
    free(p);
    return NULL;
  }
  free(resp);
  return p;
}

/* ---- held-open streams and the push at the flip --------------------------------------------- */

static struct gs_streams st = {.prog = "gs_soak"};
static int64_t *push_ns; /* per stream: first true after the flip, from the flip; 0 = none */
static atomic_int pushed, early_true;
static atomic_llong flip_ns; /* when the flip command started; 0 = not yet */

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

/* gs_streams.on_msg: times each stream's first `true` after the flip. */
static void on_msg(struct gs_streams *s, int i, grpc_byte_buffer *msg, int64_t now) {
  (void)s;
  int v = decode_result(msg);
  int64_t flip = atomic_load(&flip_ns);
  if (v == 1 && flip == 0)
    atomic_fetch_add(&early_true, 1); /* active before the load arrived: a wrong push */
  if (v == 1 && flip > 0 && push_ns[i] == 0) {
    push_ns[i] = now - flip > 0 ? now - flip : 1;
    atomic_fetch_add(&pushed, 1);
  }
}

/* --mix K: the streams carry K distinct triggers, each the -m metadata plus, for trigger j, a
 * scope (cluster, workload over the simulated agents' "bench-vllm-*" pods in namespace bench, or
 * node bench-node-NNN, the j/3-th of --mix-nodes, in turn) and an activationThreshold of its
 * own (0.5 + 0.05 * (j / 3): below the busy readings, above the idle 0). */
static struct gs_md *mix_triggers(void) {
  struct gs_md *mds = calloc((size_t)o.mix, sizeof *mds);
  for (int j = 0; mds && j < o.mix; j++) {
    char kv[128];
    int rc = 0;
    for (size_t k = 0; k < o.md.n && !rc; k++) {
      snprintf(kv, sizeof kv, "%s=%s", o.md.key[k], o.md.val[k]);
      rc = gs_md_add(&mds[j], kv);
    }
    snprintf(kv, sizeof kv, "activationThreshold=%.2f", 0.5 + 0.05 * (j / 3));
    rc = rc || gs_md_add(&mds[j], kv);
    if (j % 3 == 0) {
      rc = rc || gs_md_add(&mds[j], "scope=cluster");
    } else if (j % 3 == 1) {
      rc = rc || gs_md_add(&mds[j], "scope=workload") || gs_md_add(&mds[j], "pods=bench-vllm-.*") ||
           gs_md_add(&mds[j], "namespace=bench");
    } else {
      snprintf(kv, sizeof kv, "node=bench-node-%03d",
               (j / 3) % (o.mix_nodes > 0 ? o.mix_nodes : 1));
      rc = rc || gs_md_add(&mds[j], "scope=node") || gs_md_add(&mds[j], kv);
    }
    if (rc) {
      fprintf(stderr, "gs_soak: --mix: too much metadata\n");
      exit(1);
    }
  }
  return mds;
}

/* Opens o.streams streams carrying the run's ScaledObjectRef and waits (up to 60 s) for each
 * one's first message. Returns 0 or -1 with stderr. */
static int open_streams(void) {
  push_ns = calloc((size_t)o.streams, sizeof *push_ns);
  if (!push_ns) {
    fprintf(stderr, "gs_soak: out of memory\n");
    return -1;
  }
  st.n = o.streams;
  st.on_msg = on_msg;
  if (o.mix > 0) {
    st.mds = mix_triggers();
    st.nmds = o.mix;
    if (!st.mds) {
      fprintf(stderr, "gs_soak: out of memory\n");
      return -1;
    }
  }
  int rc = gs_streams_open(&st, o.target, "gs-soak", &o.md, 60);
  if (rc != 0 && rc != GS_STREAMS_NOMEM)
    fprintf(stderr, "gs_soak: %d of %d streams had their first message within 60 s, %d ended\n",
            atomic_load(&st.first_msgs), st.n, atomic_load(&st.ended));
  return rc;
}

static void *flip_main(void *arg) {
  (void)arg;
  atomic_store(&flip_ns, (long long)gs_now_ns());
  int rc = system(o.flip_cmd);
  if (rc != 0)
    fprintf(stderr, "gs_soak: --flip-cmd exited with %d\n", rc);
  return NULL;
}

/* ---- figures -------------------------------------------------------------------------------- */

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
  qsort(v, k, sizeof *v, gs_cmp_u32);
  printf("%s calls=%zu errors=%zu skipped=%zu p50_us=%" PRIu32 " p99_us=%" PRIu32
         " p999_us=%" PRIu32 " max_us=%" PRIu32 "\n",
         prefix, k, errors, skipped, gs_rank(v, k, 50), gs_rank(v, k, 99), gs_rank(v, k, 99.9),
         k ? v[k - 1] : 0);
  free(v);
}

static void usage(FILE *f) {
  fprintf(f, "usage: gs_soak --target HOST:PORT [--rate R] [--seconds S] [--window W]\n"
             "               [--streams N [--ready-file F] --flip-after S --flip-cmd CMD]\n"
             "               [--mix K [--mix-nodes N]] [--sent-file F] [-m key=value]...\n"
             "Prints 'window=I start_s=.. calls=.. errors=.. p50_us=.. p99_us=.. p999_us=.. "
             "max_us=..'\nper window, 'total ...' and with streams 'push streams=N pushed=K "
             "p50_us=.. p99_us=.. max_us=..'; with --sent-file (gs_gateway_agents' stdout)\n"
             "also 'push_update ...', the push timed from the first changed update sent.\n");
}

static int parse_args(int argc, char **argv) {
  o.rate = 1000;
  o.seconds = 10;
  o.window = 300;
  o.flip_after = -1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = gs_opt_value(argc, argv, &i, usage);
    if (!v)
      return -1;
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
    else if (!strcmp(a, "--sent-file"))
      o.sent_file = v;
    else if (!strcmp(a, "--ready-file"))
      o.ready_file = v;
    else if (!strcmp(a, "--mix"))
      o.mix = (int)strtol(v, &end, 10);
    else if (!strcmp(a, "--mix-nodes"))
      o.mix_nodes = (int)strtol(v, &end, 10);
    else if (!strcmp(a, "-m")) {
      if (gs_md_add(&o.md, v) != 0) {
        fprintf(stderr, "gs_soak: -m wants key=value (at most %d)\n", GS_MAX_MD);
        return -1;
      }
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
      o.window <= 0 || o.streams < 0 || o.streams > GS_MAX_STREAMS || o.mix < 0 ||
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
  int64_t t0 = gs_now_ns() + 10000000LL, period = (int64_t)(1e9 / o.rate);
  long next = 0;
  bool flipped = o.flip_cmd == NULL;
  pthread_t flipper;
  while (next < total || nfree < MAX_INFLIGHT) {
    int64_t now = gs_now_ns();
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
        grpc_slice body = grpc_slice_from_copied_buffer((const char *)req, reqlen);
        if (gs_unary_start(&s->u, ch, cq, gs_m_metrics, gs_in_ms(CALL_DEADLINE_MS), body, s) != 0) {
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
    if (ev.success && s->u.status == GRPC_STATUS_OK) {
      int64_t us = (gs_now_ns() - (t0 + s->k * period)) / 1000;
      lat[s->k] = us >= LAT_SKIPPED ? LAT_SKIPPED - 1 : (uint32_t)us;
    } else {
      lat[s->k] = LAT_FAILED;
    }
    gs_unary_done(&s->u);
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

/* --sent-file F: the simulated agents' "sent agents=N first_ns=T0 last_ns=T1" line (their
 * changed updates, CLOCK_MONOTONIC like gs_now_ns). Prints each stream's push timed from T0,
 * the first changed update sent, beside the figures from the signal. A stream turns active
 * after the update that turns it is sent (at or after T0, and before it arrives at the gateway):
 * timed from T0, a push is never shorter than from that update's arrival, and at most
 * T1 - T0 longer. */
static void report_push_from_updates(const int64_t *abs_ns) {
  FILE *f = fopen(o.sent_file, "r");
  char line[256];
  long long first = 0, last = 0;
  int agents = 0;
  bool found = false;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "sent agents=%d first_ns=%lld last_ns=%lld", &agents, &first, &last) == 3)
      found = true;
  if (f)
    fclose(f);
  if (!found) {
    printf("push_update none: no 'sent' line in %s\n", o.sent_file);
    return;
  }
  uint32_t *v = malloc((size_t)st.n * sizeof *v);
  size_t k = 0;
  for (int i = 0; v && i < st.n; i++) {
    if (abs_ns[i] <= 0)
      continue;
    int64_t d = abs_ns[i] - first > 0 ? (abs_ns[i] - first) / 1000 : 0;
    v[k++] = (uint32_t)(d > UINT32_MAX ? UINT32_MAX : d);
  }
  if (!v)
    return;
  qsort(v, k, sizeof *v, gs_cmp_u32);
  printf("push_update agents=%d pushed=%zu p50_us=%" PRIu32 " p99_us=%" PRIu32 " max_us=%" PRIu32
         " sent_spread_us=%lld signal_to_first_us=%lld\n",
         agents, k, gs_rank(v, k, 50), gs_rank(v, k, 99), k ? v[k - 1] : 0, (last - first) / 1000,
         (first - (long long)atomic_load(&flip_ns)) / 1000);
  free(v);
}

static int report_push(void) {
  uint32_t *v = malloc((size_t)st.n * sizeof *v);
  size_t k = 0;
  for (int i = 0; v && i < st.n; i++)
    if (push_ns[i] > 0)
      v[k++] = (uint32_t)(push_ns[i] / 1000 > UINT32_MAX ? UINT32_MAX : push_ns[i] / 1000);
  if (!v)
    return 1;
  if (o.sent_file) {
    int64_t *abs_ns = calloc((size_t)st.n, sizeof *abs_ns);
    for (int i = 0; abs_ns && i < st.n; i++)
      abs_ns[i] = push_ns[i] > 0 ? atomic_load(&flip_ns) + push_ns[i] : 0;
    if (abs_ns)
      report_push_from_updates(abs_ns);
    free(abs_ns);
  }
  qsort(v, k, sizeof *v, gs_cmp_u32);
  printf("push streams=%d pushed=%zu early_true=%d ended=%d p50_us=%" PRIu32 " p99_us=%" PRIu32
         " min_us=%" PRIu32 " max_us=%" PRIu32 "\n",
         st.n, k, atomic_load(&early_true), atomic_load(&st.ended), gs_rank(v, k, 50),
         gs_rank(v, k, 99), k ? v[0] : 0, k ? v[k - 1] : 0);
  free(v);
  return (int)k == st.n && atomic_load(&early_true) == 0 && atomic_load(&st.ended) == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
  if (parse_args(argc, argv) != 0)
    return 2;
  grpc_init();
  int rc = 1;
  grpc_channel *ch = gs_channel(o.target);
  size_t reqlen = 0;
  uint8_t *req = build_request(ch, &reqlen);
  if (!req)
    goto out;
  if (o.streams > 0) {
    int64_t t = gs_now_ns();
    if (open_streams() != 0)
      goto out;
    printf("streams=%d open_ms=%.0f\n", st.n, (double)(gs_now_ns() - t) / 1e6);
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
    gs_streams_close(&st, 20);
  grpc_channel_destroy(ch);
  free(req);
  free(push_ns);
  gs_md_free(&o.md);
  grpc_shutdown();
  return rc;
}
