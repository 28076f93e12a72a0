/* The node API watcher: per agent address one channel and one WatchGPUs call, all on a single
 * completion queue polled by the watcher's own thread, which also runs the reconnect timers.
 * See docs/internals/node-api.md. */
#include "rpc/watch.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "core/err.h"
#include "core/log.h"
#include "core/timeutil.h"
#include "rpc/node_wire.h"
#include "rpc/status.h"
#include "rpc/wire.h"

#include "node.pb-c.h"

#define MOD "watch"
#define ADDR_MAX 256
#define POLL_CAP_MS 1000 /* longest wait on the queue: a safety net behind the wake-up */
/* The thread takes what completed in batches, every BATCH_MS, rather than waiting on the queue:
 * a thread waiting on a queue is woken (a futex and a context switch) for each completion that
 * another thread's polling delivers, i.e. for each agent update; 2 000 agents made that most of
 * the gateway's CPU. At most BATCH_MAX completions between two looks at the targets. */
#define BATCH_MS 50
#define BATCH_MAX 4096
/* A target nothing ever connects to: its channel only exists to post wake-ups on our queue. */
#define WAKE_TARGET "unix:/nonexistent/gpuscale-watch-wake"

enum tag_kind { TAG_START, TAG_RECV, TAG_STATUS, TAG_WAKE };

struct target;

struct wtag {
  enum tag_kind kind;
  struct target *t;
};

/* One agent address: its channel, and the current WatchGPUs call or the time of the next one.
 * Owned and touched by the watcher's thread only. */
struct target {
  struct target *next;
  char addr[ADDR_MAX];
  grpc_channel *ch;
  bool removed; /* no longer wanted: freed once its call is released, no more callbacks */
  enum watch_state state;
  int64_t retry_at_ms; /* WATCH_BACKOFF: monotonic time of the next call */
  int64_t backoff_ms;  /* base of the next delay; back to the minimum after a snapshot */

  /* The call in progress, if call != NULL. */
  grpc_call *call;
  int pending; /* batches started and not completed */
  bool recv_posted, status_done;
  struct wtag t_start, t_recv, t_status;
  grpc_byte_buffer *send_bb, *recv_bb;
  grpc_metadata_array initial_md, trailing_md;
  grpc_status_code status;
  grpc_slice details;
  char fail[256]; /* a local reason to end the call (bad snapshot); wins over the status */
  /* The heartbeat terms the call was made with; renew: cancelled to be made again at once with
   * newer terms (no state change: the agent stays connected meanwhile). */
  uint32_t hb_passes;
  uint64_t change_fields;
  bool renew;
};

struct watcher {
  struct watcher_config cfg;
  grpc_completion_queue *cq;
  grpc_channel *wake_ch;
  struct wtag t_wake;
  pthread_t thread;

  /* Thread only. */
  struct target *targets;
  unsigned seed;
  struct node_wire_room room; /* decoding: reused by every message, no allocation per update */
  bool draining;
  /* start_due's last answer, and whether a target lost its call since (then it runs again):
   * with thousands of agents connected, no walk of the targets per message. */
  int64_t next_due;
  bool rescan;

  pthread_mutex_t mu;
  pthread_cond_t cv;    /* stop or dirty set: ends the thread's wait between batches */
  bool stop;            /* under mu */
  bool dirty;           /* under mu: desired was replaced */
  bool terms_dirty;     /* under mu: want_hb / want_fields were changed */
  uint32_t want_hb;     /* under mu: WatchGPUsRequest.heartbeat_passes for new calls */
  uint64_t want_fields; /* under mu: WatchGPUsRequest.change_fields */
  uint32_t hb_passes;   /* thread: the terms new calls are made with */
  uint64_t change_fields;
  bool wake_pending;         /* under mu: a wake-up is posted on cq */
  char (*desired)[ADDR_MAX]; /* under mu: the wanted set, taken by the thread */
  size_t ndesired;
};

const char *watch_state_name(enum watch_state st) {
  switch (st) {
  case WATCH_CONNECTING: return "connecting";
  case WATCH_CONNECTED: return "connected";
  case WATCH_BACKOFF: return "backoff";
  }
  return "unknown";
}

/* The channel credentials of every agent channel. TLS: the lead switches this one function to
 * the rpc/tls.h client credentials; nothing else here depends on them. */
/* Channel credentials for the agents: TLS when configured, else plaintext. NULL when the TLS
 * files cannot be read (logged; the target is retried on the next set_targets). */
static grpc_channel_credentials *make_creds(const struct watcher *w) {
  if (!w->cfg.tls || !rpc_tls_client_enabled(w->cfg.tls))
    return grpc_insecure_credentials_create();
  grpc_channel_credentials *creds = NULL;
  char err[512];
  if (rpc_tls_client_credentials(w->cfg.tls, &creds, err, sizeof err) != 0) {
    LOG_ERROR("watch", "agent TLS: %s", err);
    return NULL;
  }
  return creds;
}

/* Posts one wake-up on the queue: watching the idle wake channel for a state it is not in, with
 * a deadline already past, completes at once. C-core has no public alarm; this is the one
 * completion another thread can cause. Under w->mu. */
static void wake_locked(struct watcher *w) {
  if (w->wake_pending)
    return;
  w->wake_pending = true;
  grpc_channel_watch_connectivity_state(w->wake_ch, GRPC_CHANNEL_SHUTDOWN,
                                        gpr_inf_past(GPR_CLOCK_MONOTONIC), w->cq, &w->t_wake);
}

static void set_state(struct watcher *w, struct target *t, enum watch_state st,
                      const char *reason) {
  if (t->state == st && st != WATCH_BACKOFF)
    return;
  t->state = st;
  if (w->cfg.on_state && !t->removed && !w->draining)
    w->cfg.on_state(w->cfg.ud, t->addr, st, reason);
}

/* ---- targets ---- */

static grpc_channel *channel_new(const struct watcher *w, const char *addr) {
  grpc_arg args[11];
  memset(args, 0, sizeof(args));
  static const char *const keys[11] = {
      GRPC_ARG_ENABLE_HTTP_PROXY,
      GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
      GRPC_ARG_KEEPALIVE_TIME_MS,
      GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
      GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS,
      GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, /* 0: keep pinging on a quiet server stream */
      GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
      GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
      GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
      GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, /* a restarted agent on the same address starts afresh */
      /* 0: no BDP ping per burst of received data. Each agent update is a burst, so with it
       * on every update cost a PING out and its ACK back (a quarter of the gateway's CPU at 500
       * agents); snapshots are small and the default window carries them. */
      GRPC_ARG_HTTP2_BDP_PROBE,
  };
  const int vals[11] = {
      0, (int)w->cfg.max_message, w->cfg.keepalive_ms,   w->cfg.keepalive_timeout_ms, 1,
      0, w->cfg.backoff_min_ms,   w->cfg.backoff_min_ms, w->cfg.backoff_max_ms,       1,
      0};
  for (size_t i = 0; i < 11; i++) {
    args[i].type = GRPC_ARG_INTEGER;
    args[i].key = (char *)(uintptr_t)keys[i];
    args[i].value.integer = vals[i];
  }
  grpc_channel_args cargs = {11, args};
  grpc_arg all[12];
  memcpy(all, args, sizeof args);
  if (w->cfg.tls && w->cfg.tls->server_name_override && *w->cfg.tls->server_name_override) {
    all[11].type = GRPC_ARG_STRING;
    all[11].key = (char *)(uintptr_t)GRPC_SSL_TARGET_NAME_OVERRIDE_ARG;
    all[11].value.string = (char *)(uintptr_t)w->cfg.tls->server_name_override;
    cargs.num_args = 12;
    cargs.args = all;
  }
  grpc_channel_credentials *creds = make_creds(w);
  if (!creds)
    return NULL;
  grpc_channel *ch = grpc_channel_create(addr, creds, &cargs);
  grpc_channel_credentials_release(creds);
  return ch;
}

static struct target *target_new(struct watcher *w, const char *addr) {
  struct target *t = calloc(1, sizeof(*t));
  if (!t)
    return NULL;
  memcpy(t->addr, addr, strnlen(addr, ADDR_MAX - 1));
  t->ch = channel_new(w, addr);
  if (!t->ch) {
    free(t);
    return NULL;
  }
  t->t_start = (struct wtag){TAG_START, t};
  t->t_recv = (struct wtag){TAG_RECV, t};
  t->t_status = (struct wtag){TAG_STATUS, t};
  t->state = WATCH_BACKOFF; /* not reported: the first call reports CONNECTING */
  t->retry_at_ms = time_mono_ms();
  t->backoff_ms = w->cfg.backoff_min_ms;
  t->next = w->targets;
  w->targets = t;
  return t;
}

/* Unlinks and frees t, whose call (if any) is already released. */
static void target_free(struct watcher *w, struct target *t) {
  for (struct target **pp = &w->targets; *pp; pp = &(*pp)->next) {
    if (*pp == t) {
      *pp = t->next;
      break;
    }
  }
  grpc_channel_destroy(t->ch);
  free(t);
}

/* ---- one WatchGPUs call ---- */

static void post_recv(struct target *t) {
  grpc_op op;
  memset(&op, 0, sizeof(op));
  op.op = GRPC_OP_RECV_MESSAGE;
  op.data.recv_message.recv_message = &t->recv_bb;
  t->recv_bb = NULL;
  if (grpc_call_start_batch(t->call, &op, 1, &t->t_recv, NULL) == GRPC_CALL_OK) {
    t->pending++;
    t->recv_posted = true;
  } else {
    snprintf(t->fail, sizeof(t->fail), "cannot start RECV_MESSAGE");
    grpc_call_cancel(t->call, NULL);
  }
}

static void call_release(struct target *t) {
  grpc_call_unref(t->call);
  t->call = NULL;
  if (t->send_bb)
    grpc_byte_buffer_destroy(t->send_bb);
  if (t->recv_bb)
    grpc_byte_buffer_destroy(t->recv_bb);
  t->send_bb = t->recv_bb = NULL;
  grpc_metadata_array_destroy(&t->initial_md);
  grpc_metadata_array_destroy(&t->trailing_md);
  grpc_slice_unref(t->details);
}

/* Called after each completion: once nothing is outstanding, releases the call and schedules
 * the next one after a jittered, doubling delay (or frees a removed target). */
static void call_start(struct watcher *w, struct target *t, bool renew);

static void maybe_end(struct watcher *w, struct target *t) {
  if (!t->call || t->pending > 0)
    return;
  char reason[512];
  if (t->fail[0]) {
    snprintf(reason, sizeof(reason), "%s", t->fail);
  } else {
    size_t n = GRPC_SLICE_LENGTH(t->details);
    snprintf(reason, sizeof(reason), "%s: %.*s", rpc_code_name((int)t->status),
             (int)(n > 300 ? 300 : n), (const char *)GRPC_SLICE_START_PTR(t->details));
  }
  call_release(t);
  w->rescan = true;
  if (t->removed) {
    target_free(w, t);
    return;
  }
  if (w->draining)
    return;
  if (t->renew && !t->fail[0]) { /* cancelled for newer terms: made again at once */
    t->renew = false;
    call_start(w, t, true);
    return;
  }
  /* +-20 % jitter, so that agents restarted together are not all retried in the same instant. */
  double jitter = 0.8 + 0.4 * ((double)rand_r(&w->seed) / (double)RAND_MAX);
  int64_t delay = (int64_t)((double)t->backoff_ms * jitter);
  if (delay > w->cfg.backoff_max_ms)
    delay = w->cfg.backoff_max_ms;
  t->retry_at_ms = time_mono_ms() + delay;
  t->backoff_ms *= 2;
  if (t->backoff_ms > w->cfg.backoff_max_ms)
    t->backoff_ms = w->cfg.backoff_max_ms;
  size_t len = strlen(reason);
  snprintf(reason + len, sizeof(reason) - len, "; retrying in %lldms", (long long)delay);
  LOG_DEBUG(MOD, "%s: %s", t->addr, reason);
  set_state(w, t, WATCH_BACKOFF, reason);
}

/* A WatchGPUsRequest with these terms, in a byte buffer (NULL on ENOMEM). */
static grpc_byte_buffer *watch_request(uint32_t hb_passes, uint64_t change_fields) {
  Gpuscale__V1__WatchGPUsRequest r = GPUSCALE__V1__WATCH_GPUS_REQUEST__INIT;
  r.heartbeat_passes = hb_passes;
  r.change_fields = change_fields;
  uint8_t buf[32];
  size_t len = protobuf_c_message_pack(&r.base, buf);
  return rpc_wire_buffer(buf, len);
}

/* Starts WatchGPUs on t: request, half-close and initial metadata in one batch, the status and
 * the first message in two more. */
static void call_start(struct watcher *w, struct target *t, bool renew) {
  t->fail[0] = '\0';
  t->renew = false;
  t->pending = 0;
  t->recv_posted = t->status_done = false;
  t->status = GRPC_STATUS_OK;
  t->details = grpc_empty_slice();
  grpc_metadata_array_init(&t->initial_md);
  grpc_metadata_array_init(&t->trailing_md);
  grpc_slice method = grpc_slice_from_static_string(NODE_METHOD_WATCH_GPUS);
  /* No deadline: the stream lives as long as the agent; keepalive finds dead connections. */
  t->call = grpc_channel_create_call(t->ch, NULL, GRPC_PROPAGATE_DEFAULTS, w->cq, method, NULL,
                                     gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
  t->hb_passes = w->hb_passes;
  t->change_fields = w->change_fields;
  t->send_bb = watch_request(t->hb_passes, t->change_fields);
  if (!t->call || !t->send_bb) {
    if (t->send_bb)
      grpc_byte_buffer_destroy(t->send_bb);
    t->send_bb = NULL;
    grpc_metadata_array_destroy(&t->initial_md);
    grpc_metadata_array_destroy(&t->trailing_md);
    if (t->call)
      grpc_call_unref(t->call);
    t->call = NULL;
    t->retry_at_ms = time_mono_ms() + t->backoff_ms;
    w->rescan = true;
    set_state(w, t, WATCH_BACKOFF, "cannot create a call (out of memory)");
    return;
  }
  if (!renew)
    set_state(w, t, WATCH_CONNECTING, NULL);
  grpc_op ops[4];
  memset(ops, 0, sizeof(ops));
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = t->send_bb;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &t->initial_md;
  grpc_op sop;
  memset(&sop, 0, sizeof(sop));
  sop.op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  sop.data.recv_status_on_client.trailing_metadata = &t->trailing_md;
  sop.data.recv_status_on_client.status = &t->status;
  sop.data.recv_status_on_client.status_details = &t->details;
  if (grpc_call_start_batch(t->call, &sop, 1, &t->t_status, NULL) == GRPC_CALL_OK)
    t->pending++;
  if (grpc_call_start_batch(t->call, ops, 4, &t->t_start, NULL) == GRPC_CALL_OK)
    t->pending++;
  else
    snprintf(t->fail, sizeof(t->fail), "cannot start the WatchGPUs call");
  if (!t->fail[0])
    post_recv(t);
  else
    grpc_call_cancel(t->call, NULL);
  maybe_end(w, t); /* only when C-core refused every batch */
}

/* One message arrived: decode it (from the received bytes, no copy when they are one slice),
 * report it, and ask for the next one. */
static void on_message(struct watcher *w, struct target *t) {
  struct node_snapshot snap;
  const char *err = NULL;
  int r = GS_EPARSE;
  grpc_byte_buffer_reader rd;
  if (grpc_byte_buffer_length(t->recv_bb) > w->cfg.max_message) {
    r = GS_ETOOBIG;
  } else if (grpc_byte_buffer_reader_init(&rd, t->recv_bb)) {
    grpc_slice sl = grpc_byte_buffer_reader_readall(&rd);
    grpc_byte_buffer_reader_destroy(&rd);
    r = node_wire_decode_into(&w->room, GRPC_SLICE_START_PTR(sl), GRPC_SLICE_LENGTH(sl),
                              w->cfg.max_message, &snap, &err);
    grpc_slice_unref(sl);
  }
  if (r && !err)
    err = gs_strerror(r);
  grpc_byte_buffer_destroy(t->recv_bb);
  t->recv_bb = NULL;
  if (r) {
    snprintf(t->fail, sizeof(t->fail), "bad NodeSnapshot from the agent: %s", err);
    grpc_call_cancel(t->call, NULL);
    return;
  }
  if (!t->removed && !w->draining) {
    if (t->state != WATCH_CONNECTED) {
      t->backoff_ms = w->cfg.backoff_min_ms;
      set_state(w, t, WATCH_CONNECTED, NULL);
    }
    /* The stream's terms: an agent that does not honour them sends every pass. */
    snap.heartbeat_passes = snap.heartbeats && t->hb_passes > 1 ? t->hb_passes : 1;
    if (snap.heartbeat_passes > NODE_HEARTBEAT_MAX)
      snap.heartbeat_passes = NODE_HEARTBEAT_MAX;
    snap.change_fields =
        snap.heartbeat_passes > 1 && t->change_fields ? t->change_fields : ~UINT64_C(0);
    w->cfg.on_snapshot(w->cfg.ud, t->addr, &snap);
  }
  if (!t->status_done && !t->removed && !w->draining)
    post_recv(t);
}

static void dispatch(struct watcher *w, struct wtag *tag) {
  if (tag->kind == TAG_WAKE) {
    pthread_mutex_lock(&w->mu);
    w->wake_pending = false;
    pthread_mutex_unlock(&w->mu);
    return;
  }
  struct target *t = tag->t;
  t->pending--;
  if (tag->kind == TAG_STATUS) {
    t->status_done = true;
  } else if (tag->kind == TAG_RECV) {
    t->recv_posted = false;
    if (t->recv_bb)
      on_message(w, t);
  }
  maybe_end(w, t);
}

/* ---- the thread ---- */

static bool wanted(char (*want)[ADDR_MAX], size_t n, const char *addr) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(want[i], addr) == 0)
      return true;
  return false;
}

static struct target *find_live(struct watcher *w, const char *addr) {
  for (struct target *t = w->targets; t; t = t->next)
    if (!t->removed && strcmp(t->addr, addr) == 0)
      return t;
  return NULL;
}

/* Cancels the stream of t, or frees t at once when it has none. */
static void target_remove(struct watcher *w, struct target *t) {
  t->removed = true;
  if (t->call)
    grpc_call_cancel(t->call, NULL);
  else
    target_free(w, t);
}

static void reconcile(struct watcher *w, char (*want)[ADDR_MAX], size_t n) {
  struct target *t = w->targets;
  while (t) {
    struct target *next = t->next;
    if (!t->removed && !wanted(want, n, t->addr))
      target_remove(w, t);
    t = next;
  }
  for (size_t i = 0; i < n; i++) {
    if (find_live(w, want[i]))
      continue;
    if (!target_new(w, want[i]))
      LOG_ERROR(MOD, "%s: cannot create a channel (out of memory)", want[i]);
  }
}

/* Cancels the calls made with other terms than the current ones; each is made again as it ends
 * (maybe_end). */
static void renew_calls(struct watcher *w) {
  for (struct target *t = w->targets; t; t = t->next)
    if (t->call && !t->removed && !t->renew &&
        (t->hb_passes != w->hb_passes || t->change_fields != w->change_fields)) {
      t->renew = true;
      grpc_call_cancel(t->call, NULL);
    }
}

/* Starts the calls whose retry time has come; returns the earliest retry time still ahead. */
static int64_t start_due(struct watcher *w) {
  int64_t now = time_mono_ms();
  int64_t next = now + POLL_CAP_MS;
  for (struct target *t = w->targets; t; t = t->next) {
    if (t->call || t->removed)
      continue;
    if (t->retry_at_ms <= now)
      call_start(w, t, false);
    if (!t->call && t->retry_at_ms < next)
      next = t->retry_at_ms;
  }
  return next;
}

static void drain(struct watcher *w) {
  w->draining = true;
  struct target *t = w->targets;
  while (t) {
    struct target *next = t->next;
    target_remove(w, t);
    t = next;
  }
  for (;;) {
    pthread_mutex_lock(&w->mu);
    bool wake = w->wake_pending;
    pthread_mutex_unlock(&w->mu);
    if (!w->targets && !wake)
      break;
    grpc_event ev = grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    if (ev.type == GRPC_OP_COMPLETE)
      dispatch(w, ev.tag);
  }
}

static void *watch_main(void *arg) {
  struct watcher *w = arg;
  for (;;) {
    pthread_mutex_lock(&w->mu);
    bool stop = w->stop;
    char(*want)[ADDR_MAX] = NULL;
    size_t nwant = 0;
    bool dirty = w->dirty, terms = w->terms_dirty;
    w->terms_dirty = false;
    w->hb_passes = w->want_hb;
    w->change_fields = w->want_fields;
    if (dirty) {
      want = w->desired;
      nwant = w->ndesired;
      w->desired = NULL;
      w->ndesired = 0;
      w->dirty = false;
    }
    pthread_mutex_unlock(&w->mu);
    if (dirty) {
      reconcile(w, want, nwant);
      free(want);
      w->rescan = true;
    }
    if (stop)
      break;
    if (terms)
      renew_calls(w);
    if (w->rescan || time_mono_ms() >= w->next_due) {
      w->rescan = false;
      w->next_due = start_due(w);
    }
    /* Everything completed so far, without blocking on the queue (see BATCH_MS). */
    int done = 0;
    while (done < BATCH_MAX) {
      grpc_event ev = grpc_completion_queue_next(w->cq, gpr_inf_past(GPR_CLOCK_MONOTONIC), NULL);
      if (ev.type != GRPC_OP_COMPLETE)
        break;
      dispatch(w, ev.tag);
      done++;
    }
    if (done >= BATCH_MAX || w->rescan)
      continue;
    int64_t wait_ms = w->next_due - time_mono_ms();
    if (wait_ms > BATCH_MS)
      wait_ms = BATCH_MS;
    if (wait_ms <= 0)
      continue;
    struct timespec dl = time_mono_deadline(wait_ms);
    pthread_mutex_lock(&w->mu);
    if (!w->stop && !w->dirty)
      pthread_cond_timedwait(&w->cv, &w->mu, &dl);
    pthread_mutex_unlock(&w->mu);
  }
  drain(w);
  return NULL;
}

/* ---- API ---- */

struct watcher *watcher_new(const struct watcher_config *cfg) {
  if (!cfg || !cfg->on_snapshot)
    return NULL;
  struct watcher *w = calloc(1, sizeof(*w));
  if (!w)
    return NULL;
  w->cfg = *cfg;
  if (w->cfg.backoff_min_ms <= 0)
    w->cfg.backoff_min_ms = 500;
  if (w->cfg.backoff_max_ms <= 0)
    w->cfg.backoff_max_ms = 30000;
  if (w->cfg.backoff_max_ms < w->cfg.backoff_min_ms)
    w->cfg.backoff_max_ms = w->cfg.backoff_min_ms;
  if (w->cfg.keepalive_ms <= 0)
    w->cfg.keepalive_ms = 10000;
  if (w->cfg.keepalive_timeout_ms <= 0)
    w->cfg.keepalive_timeout_ms = 5000;
  if (w->cfg.max_message == 0 || w->cfg.max_message > NODE_WIRE_MAX_BYTES)
    w->cfg.max_message = NODE_WIRE_MAX_BYTES;
  w->t_wake = (struct wtag){TAG_WAKE, NULL};
  w->seed = (unsigned)time_mono_ms() ^ (unsigned)(uintptr_t)w;
  pthread_mutex_init(&w->mu, NULL);
  cond_init_mono(&w->cv);
  w->cq = grpc_completion_queue_create_for_next(NULL);
  grpc_channel_credentials *creds = grpc_insecure_credentials_create();
  w->wake_ch = grpc_channel_create(WAKE_TARGET, creds, NULL);
  grpc_channel_credentials_release(creds);
  if (!w->cq || !w->wake_ch || pthread_create(&w->thread, NULL, watch_main, w) != 0) {
    if (w->wake_ch)
      grpc_channel_destroy(w->wake_ch);
    if (w->cq) {
      grpc_completion_queue_shutdown(w->cq);
      while (grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
             GRPC_QUEUE_SHUTDOWN) {
      }
      grpc_completion_queue_destroy(w->cq);
    }
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
    return NULL;
  }
  return w;
}

int watcher_set_targets(struct watcher *w, const char *const *addrs, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!addrs[i] || !addrs[i][0] || strnlen(addrs[i], ADDR_MAX) >= ADDR_MAX)
      return GS_EINVAL;
  char(*copy)[ADDR_MAX] = calloc(n ? n : 1, sizeof(*copy));
  if (!copy)
    return GS_ENOMEM;
  for (size_t i = 0; i < n; i++)
    memcpy(copy[i], addrs[i], strlen(addrs[i]));
  pthread_mutex_lock(&w->mu);
  if (w->stop) {
    pthread_mutex_unlock(&w->mu);
    free(copy);
    return GS_EINVAL;
  }
  char(*old)[ADDR_MAX] = w->desired;
  w->desired = copy;
  w->ndesired = n;
  w->dirty = true;
  wake_locked(w);
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
  free(old);
  return 0;
}

void watcher_set_terms(struct watcher *w, uint32_t heartbeat_passes, uint64_t change_fields) {
  if (heartbeat_passes > NODE_HEARTBEAT_MAX)
    heartbeat_passes = NODE_HEARTBEAT_MAX;
  pthread_mutex_lock(&w->mu);
  if (w->want_hb != heartbeat_passes || w->want_fields != change_fields) {
    w->want_hb = heartbeat_passes;
    w->want_fields = change_fields;
    w->terms_dirty = true;
    pthread_cond_signal(&w->cv);
  }
  pthread_mutex_unlock(&w->mu);
}

void watcher_free(struct watcher *w) {
  if (!w)
    return;
  pthread_mutex_lock(&w->mu);
  w->stop = true;
  wake_locked(w);
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->thread, NULL);
  free(w->desired);
  grpc_channel_destroy(w->wake_ch);
  grpc_completion_queue_shutdown(w->cq);
  while (grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
         GRPC_QUEUE_SHUTDOWN) {
  }
  grpc_completion_queue_destroy(w->cq);
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
  node_wire_room_free(&w->room);
  free(w);
}
