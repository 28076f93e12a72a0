/* gs_gateway_agents: many simulated gpuscale agents in one process, for the gateway benchmark
 * (bench/gateway.sh, docs/bench.md).
 *
 * Each simulated agent is a real rpc_server (src/rpc/server.c, the agent's own gRPC server) on its
 * own loopback port, serving gpuscale.v1.Node (ListGPUs, WatchGPUs) from a synthetic snapshot: 8
 * GPUs with constant readings, each held by one pod. Each agent's generation advances every
 * --interval, as the agent's sampler does, so every WatchGPUs stream gets one snapshot per pass;
 * the agents' phases are spread over the interval (--aligned: all at the same instant).
 * The gateway cannot tell these from real agents: the wire, the encoder and the stream pacing are
 * the agent's. What is left out is the agent's own sampling and kubelet work, which the gateway
 * never sees.
 *
 *   gs_gateway_agents --count 200 [--gpus 8] [--interval 1s] [--host 127.0.0.1] [--aligned]
 *                     [--idle] [--churn PCT]
 *
 * --idle: every GPU reads 0 % utilization until the process gets SIGUSR1; then every agent takes
 * one pass at once (within the server's 100 ms tick slice) carrying the usual readings, and goes
 * on at its own phase (a step from idle to busy at one instant, which bench/streams.sh gateway
 * times the StreamIsActive push of). Once every agent has built its first busy snapshot, the
 * process prints "sent agents=N first_ns=T0 last_ns=T1" (CLOCK_MONOTONIC): the first and last of
 * these changed updates, for gs_soak --sent-file.
 *
 * --churn PCT (1..100): on each pass, PCT agents in 100 (in turn) report a new memory
 * utilization on GPU 0, so the gateway sees a steady trickle of real changes; utilization, which
 * the bench's triggers read, stays put.
 *
 * Prints one line "agents ADDR,ADDR,..." on stdout once every server listens (port 0 each, so no
 * port races), then runs until SIGTERM or SIGINT. Pods: on agent k, GPU i is held by pod
 * "bench-vllm-<k>-<i>" in namespace "bench" for even i, and by "other-<k>-<i>" in namespace
 * "other" for odd i, so a workload trigger `pods: bench-vllm-.*` selects half the GPUs.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "core/log.h"
#include "core/node.h"
#include "core/profile.h"
#include "core/timeutil.h"
#include "keda/scaler.h"
#include "rpc/rpc.h"
#include "rpc/server.h"

/* Each simulated agent samples every interval_ms, at its own phase: agent k of N starts k/N of an
 * interval after the others, as agents started at different times do (--aligned: all at once,
 * the worst case for the gateway's write lock). The generation is computed from the clock, so no
 * thread drives it. */
struct clock_src {
  int64_t start_ms;
  int64_t interval_ms;
};

struct sim_agent {
  int id;
  int ngpus;
  int64_t phase_ms;
  const struct clock_src *clk;
  struct rpc_server *srv;
};

static atomic_bool busy = true; /* false from --idle until SIGUSR1 */
static atomic_llong flip_at;    /* monotonic ms of SIGUSR1; 0: not yet */

/* The pass counter of agent a at its own phase, without the pass taken at the flip. */
static uint64_t phase_gen(const struct sim_agent *a, int64_t now) {
  int64_t t = now - a->clk->start_ms - a->phase_ms;
  return t < 0 ? 1 : 2 + (uint64_t)(t / a->clk->interval_ms);
}

/* At SIGUSR1 every agent takes one extra pass at once (so the changed updates are sent together,
 * and a push can be timed from them), then goes on at its own phase. */
static uint64_t gen_at(const struct sim_agent *a, int64_t now) {
  int64_t f = atomic_load(&flip_at);
  return phase_gen(a, now) + (f > 0 && now >= f ? 1 : 0);
}

/* scaler_source.wait_tick: sleeps until this agent's next pass after `seen`, or timeout_ms. */
static uint64_t sim_wait_tick(void *ud, uint64_t seen, int timeout_ms) {
  struct sim_agent *a = ud;
  int64_t now = time_mono_ms();
  uint64_t g = gen_at(a, now);
  if (g != seen)
    return g;
  int64_t next =
      a->clk->start_ms + a->phase_ms + (int64_t)(phase_gen(a, now) - 1) * a->clk->interval_ms;
  int64_t until = next < now + timeout_ms ? next : now + timeout_ms;
  if (until > now) {
    struct timespec ts = {(until - now) / 1000, (long)((until - now) % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
  return gen_at(a, time_mono_ms());
}

/* The changed updates after SIGUSR1: when each agent first built a snapshot with the busy
 * readings (CLOCK_MONOTONIC ns, just before it is sent), for "sent" on stdout. */
static pthread_mutex_t sent_mu = PTHREAD_MUTEX_INITIALIZER;
static bool *sent;
static int sent_n, sent_count;
static int64_t sent_first_ns, sent_last_ns;

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Agent id built its first busy snapshot: once all have, prints "sent agents=N first_ns=..
 * last_ns=..". */
static void note_sent(int id) {
  int64_t now = mono_ns();
  pthread_mutex_lock(&sent_mu);
  if (sent && !sent[id]) {
    sent[id] = true;
    if (sent_count++ == 0 || now < sent_first_ns)
      sent_first_ns = now;
    if (now > sent_last_ns)
      sent_last_ns = now;
    if (sent_count == sent_n) {
      printf("sent agents=%d first_ns=%lld last_ns=%lld\n", sent_n, (long long)sent_first_ns,
             (long long)sent_last_ns);
      fflush(stdout);
    }
  }
  pthread_mutex_unlock(&sent_mu);
}

static int churn; /* --churn PCT: agents per 100 whose reading moves each pass */

static double util_of(int agent, int gpu) {
  if (!atomic_load(&busy))
    return 0;
  return (double)((agent * 7 + gpu * 13 + 11) % 101);
}

/* scaler_source.values: node scope on the simulated agent itself (not used by the bench). */
static int sim_values(void *ud, const struct trigger *t, double *vals, size_t cap, size_t *n,
                      char *err, size_t errlen) {
  (void)t;
  (void)err;
  (void)errlen;
  struct sim_agent *a = ud;
  size_t k = 0;
  for (int i = 0; i < a->ngpus && k < cap; i++)
    vals[k++] = util_of(a->id, i);
  *n = k;
  return 0;
}

/* rpc_server_config.node_snapshot: the synthetic node, stamped with the shared generation. */
static int sim_snapshot(void *ud, struct node_snapshot *out) {
  struct sim_agent *a = ud;
  memset(out, 0, sizeof *out);
  struct node_gpu *g = calloc((size_t)a->ngpus, sizeof *g);
  if (!g)
    return GS_ENOMEM;
  uint64_t gen = gen_at(a, time_mono_ms());
  int64_t now = time_wall_ms();
  if (atomic_load(&flip_at) > 0 && atomic_load(&busy))
    note_sent(a->id);
  for (int i = 0; i < a->ngpus; i++) {
    struct node_gpu *x = &g[i];
    x->info.index = i;
    snprintf(x->info.uuid, sizeof x->info.uuid, "GPU-be0c%04x-0000-4000-8000-%012d", a->id, i);
    snprintf(x->info.name, sizeof x->info.name, "NVIDIA Bench-80GB");
    snprintf(x->info.pci_bus_id, sizeof x->info.pci_bus_id, "00000000:%02X:00.0", 0x10 + i);
    x->info.minor = i;
    x->info.parent_index = -1;
    x->info.gi_id = -1;
    x->health = GPU_HEALTH_OK;
    x->has_sample = true;
    x->fresh = true;
    x->age_ms = 0;
    x->latest.ts_ms = now;
    sample_set(&x->latest, GF_GPU_UTIL, util_of(a->id, i));
    sample_set(&x->latest, GF_MEM_UTIL, (double)((a->id + i * 17) % 100));
    if (churn > 0 && i == 0 && (gen + (uint64_t)a->id) % (uint64_t)(100 / churn) == 0)
      x->latest.v[GF_MEM_UTIL] = (double)(gen % 100); /* --churn: a value that moved */
    sample_set(&x->latest, GF_MEM_TOTAL_MIB, 81920);
    sample_set(&x->latest, GF_MEM_USED_MIB, (double)(8192 + (a->id * 977 + i * 131) % 65536));
    sample_set(&x->latest, GF_MEM_FREE_MIB, 81920 - x->latest.v[GF_MEM_USED_MIB]);
    sample_set(&x->latest, GF_TEMP_C, (double)(30 + (a->id + i) % 50));
    sample_set(&x->latest, GF_POWER_W, 100.5 + i * 3);
    sample_derive(&x->latest);
    struct pod_ref *p = &x->pods.pods[0];
    bool vllm = i % 2 == 0;
    snprintf(p->ns, sizeof p->ns, "%s", vllm ? "bench" : "other");
    snprintf(p->pod, sizeof p->pod, "%s-%d-%d", vllm ? "bench-vllm" : "other", a->id, i);
    snprintf(p->container, sizeof p->container, "main");
    x->pods.n = x->pods.total = 1;
  }
  snprintf(out->node, sizeof out->node, "bench-node-%03d", a->id);
  snprintf(out->driver_version, sizeof out->driver_version, "550.54.15");
  out->interval_ms = a->clk->interval_ms;
  out->generation = gen;
  out->taken_ms = now;
  out->attribution = true;
  out->n = (size_t)a->ngpus;
  out->gpus = g;
  return 0;
}

#define SHUTDOWN_THREADS 16

struct shutdown_slice {
  struct sim_agent *agents;
  int from, to;
};

static void *shutdown_main(void *arg) {
  struct shutdown_slice *sl = arg;
  for (int i = sl->from; i < sl->to; i++)
    rpc_server_shutdown(sl->agents[i].srv, 100);
  return NULL;
}

static void shutdown_all(struct sim_agent *agents, int n) {
  struct shutdown_slice sl[SHUTDOWN_THREADS];
  pthread_t th[SHUTDOWN_THREADS];
  bool ok[SHUTDOWN_THREADS];
  int per = (n + SHUTDOWN_THREADS - 1) / SHUTDOWN_THREADS;
  for (int t = 0; t < SHUTDOWN_THREADS; t++) {
    sl[t] = (struct shutdown_slice){agents, t * per, (t + 1) * per < n ? (t + 1) * per : n};
    ok[t] = sl[t].from < sl[t].to && pthread_create(&th[t], NULL, shutdown_main, &sl[t]) == 0;
    if (!ok[t])
      shutdown_main(&sl[t]);
  }
  for (int t = 0; t < SHUTDOWN_THREADS; t++)
    if (ok[t])
      pthread_join(th[t], NULL);
}

static int parse_ms(const char *s, int64_t *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || v <= 0)
    return -1;
  if (strcmp(end, "ms") == 0)
    *out = (int64_t)v;
  else if (strcmp(end, "s") == 0 || *end == '\0')
    *out = (int64_t)(v * 1000);
  else
    return -1;
  return *out > 0 ? 0 : -1;
}

static void usage(void) {
  fprintf(stderr, "usage: gs_gateway_agents --count N [--gpus G] [--interval DURATION] "
                  "[--host IP] [--aligned] [--idle] [--churn PCT]\n"
                  "Prints \"agents ADDR,ADDR,...\" once listening; runs until SIGTERM/SIGINT.\n"
                  "--idle: 0 %% utilization until SIGUSR1, the usual readings after.\n"
                  "--churn PCT: each pass, PCT of 100 agents report a new memory utilization on\n"
                  "GPU 0 (a change the gateway must notice; no utilization trigger flips).\n");
}

int main(int argc, char **argv) {
  int count = 0, ngpus = 8;
  int64_t interval_ms = 1000;
  const char *host = "127.0.0.1";
  bool aligned = false;
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage();
      return 0;
    }
    if (!strcmp(argv[i], "--aligned")) {
      aligned = true;
      continue;
    }
    if (!strcmp(argv[i], "--idle")) {
      atomic_store(&busy, false);
      continue;
    }
    if (!v) {
      usage();
      return 2;
    }
    if (!strcmp(argv[i], "--count"))
      count = (int)strtol(v, NULL, 10);
    else if (!strcmp(argv[i], "--gpus"))
      ngpus = (int)strtol(v, NULL, 10);
    else if (!strcmp(argv[i], "--interval")) {
      if (parse_ms(v, &interval_ms)) {
        usage();
        return 2;
      }
    } else if (!strcmp(argv[i], "--host"))
      host = v;
    else if (!strcmp(argv[i], "--churn"))
      churn = (int)strtol(v, NULL, 10);
    else {
      usage();
      return 2;
    }
    i++;
  }
  if (count < 1 || count > 4096 || ngpus < 1 || ngpus > NODE_MAX_GPUS || churn < 0 || churn > 100) {
    usage();
    return 2;
  }

  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set, NULL); /* before any thread: they inherit the mask */
  log_setup(LOG_LVL_WARN, LOG_FMT_LOGFMT);
  rpc_global_init();

  struct profile_set profiles;
  memset(&profiles, 0, sizeof profiles);
  struct clock_src clk = {time_mono_ms(), interval_ms};
  struct sim_agent *agents = calloc((size_t)count, sizeof *agents);
  struct scaler *scalers = calloc((size_t)count, sizeof *scalers);
  sent = calloc((size_t)count, sizeof *sent);
  sent_n = count;
  int rc = 1, started = 0;
  if (!agents || !scalers || !sent || profile_set_init(&profiles)) {
    fprintf(stderr, "gs_gateway_agents: out of memory or threads\n");
    return 1;
  }
  char listen[128], err[256];
  snprintf(listen, sizeof listen, "%s:0", host);
  for (int i = 0; i < count; i++) {
    struct sim_agent *a = &agents[i];
    a->id = i;
    a->ngpus = ngpus;
    a->clk = &clk;
    a->phase_ms = aligned ? 0 : interval_ms * i / count;
    scalers[i].profiles = &profiles;
    scalers[i].src.values = sim_values;
    scalers[i].src.wait_tick = sim_wait_tick;
    scalers[i].src.ud = a;
    struct rpc_server_config cfg = {0};
    cfg.listen = listen;
    cfg.scaler = &scalers[i];
    cfg.tick_ms = (int)interval_ms;
    cfg.workers = 1;
    cfg.node_snapshot = sim_snapshot;
    cfg.node_ud = a;
    if (rpc_server_start(&cfg, &a->srv, err, sizeof err) != 0) {
      fprintf(stderr, "gs_gateway_agents: agent %d: %s\n", i, err);
      goto out;
    }
    started++;
  }
  printf("agents ");
  for (int i = 0; i < count; i++)
    printf("%s%s:%d", i ? "," : "", host, rpc_server_port(agents[i].srv));
  printf("\n");
  fflush(stdout);

  int sig = 0;
  while (sigwait(&set, &sig) == 0 && sig == SIGUSR1) {
    if (atomic_load(&flip_at) == 0) /* first: a busy snapshot is then always noted */
      atomic_store(&flip_at, (long long)time_mono_ms());
    atomic_store(&busy, true);
  }
  rc = 0;

out:
  shutdown_all(agents, started); /* in parallel: each joins its threads */
  free(agents);
  free(scalers);
  free(sent);
  profile_set_free(&profiles);
  rpc_global_shutdown();
  return rc;
}
