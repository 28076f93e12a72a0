/* Shared start-up and signal handling of the long-running commands. */
#include "cli/serve.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/memtrim.h"
#include "core/timeutil.h"

bool serve_parse(const char *cmd, const struct opt_def *defs, size_t n, int argc, char **argv,
                 void *target, const struct serve_opts *so, const char *usage, const char *desc,
                 int *exit_code) {
  char err[1024];
  int rc = config_parse(defs, n, argc, argv, 1, target, err, sizeof err);
  if (rc == 1) {
    config_help(stdout, usage, desc, defs, n);
    *exit_code = 0;
    return false;
  }
  struct rpc_tls_server tls = serve_tls(so);
  if (rc == 0 && rpc_tls_server_check(&tls, err, sizeof err) != 0)
    rc = -1;
  if (rc) {
    fprintf(stderr, "gpuscale %s: %s\n", cmd, err);
    *exit_code = 2;
    return false;
  }
  enum log_level lvl = LOG_LVL_INFO;
  enum log_format fmt = LOG_FMT_LOGFMT;
  log_level_parse(so->log_level, &lvl);
  log_format_parse(so->log_format, &fmt);
  log_setup(lvl, fmt);
  return true;
}

struct rpc_tls_server serve_tls(const struct serve_opts *so) {
  struct rpc_tls_server t = {so->tls_cert, so->tls_key, so->tls_ca, so->tls_require_client_cert,
                             "tls"};
  return t;
}

static void signal_set(sigset_t *set) {
  sigemptyset(set);
  sigaddset(set, SIGTERM);
  sigaddset(set, SIGINT);
  sigaddset(set, SIGHUP);
}

void serve_block_signals(void) {
  sigset_t set;
  signal_set(&set);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);
}

void serve_wait(const char *module, int64_t grace_ms, void (*on_hup)(void *ud),
                void (*on_idle)(void *ud), int idle_ms, void *ud) {
  sigset_t set;
  signal_set(&set);
  /* Start-up is done: give back what parsing and set-up freed (memtrim.h). */
  mem_release(0);
  int64_t now = time_mono_ms();
  int64_t next_idle = now + idle_ms, next_release = now + MEM_RELEASE_EVERY_MS;
  for (;;) {
    int64_t wait_ms = (on_idle && next_idle < next_release ? next_idle : next_release) - now;
    if (wait_ms < 1)
      wait_ms = 1;
    struct timespec ts = {(time_t)(wait_ms / 1000), (long)(wait_ms % 1000) * 1000000L};
    int sig = sigtimedwait(&set, NULL, &ts);
    now = time_mono_ms();
    if (sig < 0) {
      if (errno != EAGAIN && errno != EINTR) /* cannot wait: do not spin */
        sleep(1);
      if (on_idle && now >= next_idle) {
        on_idle(ud);
        next_idle = now + idle_ms;
      }
      if (now >= next_release) {
        if (mem_release(MEM_RELEASE_MIN_FREE))
          LOG_DEBUG(module, "gave freed heap memory back to the kernel");
        next_release = now + MEM_RELEASE_EVERY_MS;
      }
      continue;
    }
    if (sig == SIGHUP) {
      if (on_hup)
        on_hup(ud);
      continue;
    }
    LOG_INFO(module, "%s: shutting down (grace %lldms)", sig == SIGTERM ? "SIGTERM" : "SIGINT",
             (long long)grace_ms);
    return;
  }
}
