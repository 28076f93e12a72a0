/* The stream ticker's pass (docs/gateway.md, "Sizing"): re-evaluates the open streams and sends
 * what changed.
 *
 * StreamIsActive streams that hold the same shared trigger (keda/trigger_cache.h: the same
 * metadata, one parsed entry, one memoized answer per stamp) get the same answer, so they are
 * kept in a group: a pass evaluates one member of each group and walks the others only when that
 * answer differs from the one the group last applied to all of them. A pass then costs
 * O(distinct triggers) plus O(streams whose answer changed), not O(streams). Every other stream
 * (health, StreamMetricSpec, WatchGPUs, a StreamIsActive stream whose trigger is not shared, or
 * not yet evaluated) is on the loose list and evaluated at every pass, as before; a stream joins
 * its group after an evaluation of its own.
 *
 * A group breaks up (its members go back to the loose list and are evaluated one by one in the
 * same pass) when the evaluated member no longer holds the group's entry (profiles reloaded, the
 * entry evicted) or its answer is an error that ends streams. A member that joins with another
 * answer than the group's, or that could not be sent its answer, marks the group so that the next
 * answer is applied to every member again. The lists and groups are under s->mu; only the ticker
 * thread creates and frees groups. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/log.h"
#include "rpc/server_int.h"

#define MOD "rpc"

struct stream_group {
  const struct trigger_cache_entry *key; /* the entry every member holds */
  struct call *head;                     /* members, through tprev/tnext */
  size_t n;
  int v;      /* the answer last applied to every member (-1: unknown) */
  bool dirty; /* a member may not have v: apply the next answer to all */
};

static struct call **list_of(struct rpc_server *s, struct call *c) {
  return c->group ? &c->group->head : &s->loose;
}

static void unlink_locked(struct rpc_server *s, struct call *c) {
  struct call **head = list_of(s, c);
  if (c->tprev)
    c->tprev->tnext = c->tnext;
  else
    *head = c->tnext;
  if (c->tnext)
    c->tnext->tprev = c->tprev;
  c->tprev = c->tnext = NULL;
  if (c->group)
    c->group->n--;
  c->group = NULL;
}

static void link_locked(struct rpc_server *s, struct call *c, struct stream_group *g) {
  c->group = g;
  struct call **head = list_of(s, c);
  c->tprev = NULL;
  c->tnext = *head;
  if (*head)
    (*head)->tprev = c;
  *head = c;
  if (g)
    g->n++;
}

void rpcsrv_tick_add_locked(struct call *c) {
  link_locked(c->srv, c, NULL);
}

void rpcsrv_tick_remove_locked(struct call *c) {
  unlink_locked(c->srv, c);
}

void rpcsrv_tick_free(struct rpc_server *s) {
  for (size_t i = 0; i < s->ngroups; i++)
    free(s->groups[i]);
  free(s->groups);
  free(s->tick_buf);
  free(s->tick_grp);
  s->groups = NULL;
  s->tick_buf = NULL;
  s->tick_grp = NULL;
  s->ngroups = s->groups_cap = s->tick_cap = 0;
}

/* Whether c may not have its want on the wire yet with nothing under way to send it: then the
 * answer must be applied again (a failed pack or send). */
static bool unsettled(const struct call *c) {
  return c->want >= 0 && c->want != c->last_sent && !c->send_busy && !c->broken && !c->closed &&
         !c->status_started;
}

/* Applies one evaluation's result to c (under s->mu, c still counted): ends it on an error,
 * queues a spec, or sets what it should say. Returns true when the caller must call_destroy c. */
static bool apply_locked(struct call *c, int code, int v, uint8_t **spec, size_t speclen,
                         const char *msg) {
  if (!c->listed || c->finishing) /* the client may have gone meanwhile */
    return false;
  if (code)
    return rpcsrv_finish_locked(c, code, msg);
  if (spec && *spec) {
    free(c->spec_pending); /* a newer spec replaces one not yet sent */
    c->spec_pending = *spec;
    c->spec_pending_len = speclen;
    *spec = NULL;
    rpcsrv_pump_locked(c);
  } else if (c->spec_pending) { /* held back by SPEC_MIN_GAP_MS: due now? */
    rpcsrv_pump_locked(c);
  } else if (v >= 0) {
    c->want = v;
    rpcsrv_pump_locked(c);
  }
  return false;
}

/* After c's own evaluation answered v: c joins the group of the entry it holds. */
static void join_locked(struct rpc_server *s, struct call *c, int v) {
  if (c->m != M_STREAM_IS_ACTIVE || !c->hold.e || !c->listed || c->finishing || c->group)
    return;
  struct stream_group *g = NULL;
  for (size_t i = 0; i < s->ngroups && !g; i++)
    if (s->groups[i]->key == c->hold.e)
      g = s->groups[i];
  if (!g) {
    if (s->ngroups == s->groups_cap) {
      size_t cap = s->groups_cap ? 2 * s->groups_cap : 64;
      struct stream_group **ng = realloc(s->groups, cap * sizeof *ng);
      if (!ng)
        return; /* stays loose: evaluated on its own */
      s->groups = ng;
      s->groups_cap = cap;
    }
    g = calloc(1, sizeof *g);
    if (!g)
      return;
    g->key = c->hold.e;
    g->v = v;
    s->groups[s->ngroups++] = g;
  } else if (g->v != v) {
    g->dirty = true;
  }
  if (unsettled(c))
    g->dirty = true;
  unlink_locked(s, c);
  link_locked(s, c, g);
}

/* Moves every member of g back to the loose list. */
static void dissolve_locked(struct rpc_server *s, struct stream_group *g) {
  while (g->head) {
    struct call *c = g->head;
    unlink_locked(s, c);
    link_locked(s, c, NULL);
  }
  g->dirty = false;
}

static bool room_locked(struct rpc_server *s, size_t n) {
  if (n <= s->tick_cap)
    return true;
  size_t cap = n + n / 2 + 16;
  struct call **nb = realloc(s->tick_buf, cap * sizeof *nb);
  if (!nb)
    return false;
  s->tick_buf = nb;
  struct stream_group **ng = realloc(s->tick_grp, cap * sizeof *ng);
  if (!ng)
    return false;
  s->tick_grp = ng;
  s->tick_cap = cap;
  return true;
}

static void unref_unlock(struct rpc_server *s, struct call *c, bool last) {
  last = rpcsrv_unref_locked(c) || last;
  pthread_mutex_unlock(&s->mu);
  if (last)
    rpcsrv_call_destroy(c);
}

/* One member per group evaluated; its answer applied to all members when it differs from the
 * group's or the group is marked. */
static void pass_groups(struct rpc_server *s) {
  pthread_mutex_lock(&s->mu);
  size_t keep = 0;
  for (size_t i = 0; i < s->ngroups; i++) { /* empty groups go */
    if (s->groups[i]->n)
      s->groups[keep++] = s->groups[i];
    else
      free(s->groups[i]);
  }
  s->ngroups = keep;
  if (!room_locked(s, s->ngroups)) {
    pthread_mutex_unlock(&s->mu);
    LOG_ERROR(MOD, "out of memory listing %zu stream groups; retrying next tick", s->ngroups);
    return;
  }
  size_t ng = 0;
  for (size_t i = 0; i < s->ngroups; i++) {
    struct call *c = s->groups[i]->head;
    c->refs++; /* dropped below */
    s->tick_grp[ng] = s->groups[i];
    s->tick_buf[ng++] = c;
  }
  pthread_mutex_unlock(&s->mu);

  char msg[RPC_STATUS_MSG_MAX];
  struct call **members = NULL;
  size_t mcap = 0;
  for (size_t i = 0; i < ng; i++) {
    struct call *c = s->tick_buf[i];
    struct stream_group *g = s->tick_grp[i];
    int v = -1;
    int code = rpcsrv_stream_eval(c, &v, msg, sizeof msg); /* unlocked: c's own request */
    pthread_mutex_lock(&s->mu);
    size_t nm = 0;
    if (g->n && (code || c->hold.e != g->key)) {
      dissolve_locked(s, g); /* evaluated one by one in this pass's loose part */
    } else if (g->n && v >= 0 && (v != g->v || g->dirty)) {
      /* (v < 0, state unknown, changes no member's want: nothing to apply, dirty or not) */
      if (g->n > mcap) {
        size_t cap = g->n + g->n / 2 + 16;
        struct call **nb = realloc(members, cap * sizeof *nb);
        if (nb) {
          members = nb;
          mcap = cap;
        }
      }
      if (g->n <= mcap) {
        for (struct call *m = g->head; m; m = m->tnext) {
          m->refs++;
          members[nm++] = m;
        }
        g->v = v;
        g->dirty = false;
      } else {
        dissolve_locked(s, g); /* out of memory: one by one */
      }
    }
    unref_unlock(s, c, false);
    for (size_t k = 0; k < nm; k++) {
      struct call *m = members[k];
      pthread_mutex_lock(&s->mu);
      bool last = apply_locked(m, 0, v, NULL, 0, msg);
      if (m->group == g && unsettled(m))
        g->dirty = true;
      unref_unlock(s, m, last);
    }
  }
  free(members);
}

/* Every loose stream evaluated on its own, as every stream was before groups; StreamIsActive
 * ones then join their group. */
static void pass_loose(struct rpc_server *s) {
  pthread_mutex_lock(&s->mu);
  if (!room_locked(s, s->nstreams)) {
    pthread_mutex_unlock(&s->mu);
    LOG_ERROR(MOD, "out of memory listing %zu streams; retrying next tick", s->nstreams);
    return;
  }
  size_t n = 0;
  for (struct call *c = s->loose; c; c = c->tnext) {
    if (c->m == M_NODE_WATCH) {
      rpcsrv_pump_locked(c); /* sends the shared snapshot when its generation is new to it */
    } else if (!c->finishing) {
      c->refs++; /* dropped below, after the result is applied */
      s->tick_buf[n++] = c;
    }
  }
  pthread_mutex_unlock(&s->mu);

  char msg[RPC_STATUS_MSG_MAX];
  for (size_t i = 0; i < n; i++) {
    struct call *c = s->tick_buf[i];
    int v = -1;
    uint8_t *spec = NULL;
    size_t speclen = 0;
    /* unlocked: reads only c's own request */
    int code = c->m == M_STREAM_METRIC_SPEC ? rpcsrv_spec_eval(c, &spec, &speclen, msg, sizeof(msg))
                                            : rpcsrv_stream_eval(c, &v, msg, sizeof(msg));
    pthread_mutex_lock(&s->mu);
    bool last = apply_locked(c, code, v, &spec, speclen, msg);
    if (!code)
      join_locked(s, c, v);
    unref_unlock(s, c, last);
    free(spec); /* not stored: the stream went meanwhile */
  }
}

/* Re-evaluates every open stream and sends what changed. The server lock is held only to list
 * the streams (each kept alive by a reference) and, briefly, to apply one stream's result: the
 * evaluations themselves (the scaler policy, a cluster selection at the gateway) run unlocked, so
 * unary calls and completions never wait for a pass over hundreds of streams. */
void rpcsrv_tick_streams(struct rpc_server *s) {
  pass_groups(s);
  pass_loose(s);
}
