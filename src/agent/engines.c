/* Engine pods: a watch thread keeps this node's pods from the Kubernetes API (list, then watch from
 * the list's resourceVersion, list again on 410 Gone or an error, with backoff), and a scrape
 * thread reads every engine pod once per engine interval through one libcurl multi handle, so that
 * a slow pod delays nobody. Results land in a table under one mutex; engines_copy hands out
 * copies. Neither thread is the GPU sampler's. URLs from triggers (--allow-engine-endpoints) are
 * read by the refreshers of engine_urls.c, with url_read below; a call only reads their table. */
#include "agent/engines.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/engine_endpoint.h"
#include "agent/engine_read.h"
#include "agent/engine_target.h"
#include "agent/engine_urls.h"
#include "agent/podphase.h"
#include "core/buf.h"
#include "core/err.h"
#include "core/latwin.h"
#include "core/log.h"
#include "core/promtext.h"
#include "core/timeutil.h"
#include "rightsize/kube.h"

#define MOD "engines"
#define WATCH_TIMEOUT_S 300   /* the server ends a watch after this; we watch again */
#define LIST_TIMEOUT_MS 10000 /* one pod list */
#define BACKOFF_MIN_MS 1000   /* after a failed list or watch, doubling */
#define BACKOFF_MAX_MS 60000
#define URL_MAX 1024
#define NOT_ENGINE_ROUNDS 10    /* a pod that serves no engine's metrics is read again after */
#define NOT_ENGINE_MIN_MS 60000 /* this many engine intervals or this long, whichever is longer */

/* One pod of the table. */
struct epod {
  bool used;
  bool present; /* seen in the list being applied */
  uint64_t gen; /* bumped when the target changes: a scrape of the old one is dropped */
  enum engine_target_verdict verdict;
  struct engine_target t;
  struct engine_reading r; /* kind, ts_ms, valid, v, reason of the last scrape */
  struct engine_prev prev;
  /* The latency window histograms of its last scrapes, for triggers with window (core/latwin.h);
   * restarts with prev, when the pod's target changes. */
  struct latwin win;
  bool ok;         /* the last scrape succeeded */
  bool scraped;    /* at least one scrape finished */
  bool not_engine; /* prometheus.io pod never detected whose last scrape parsed but showed no
                      engine's metrics: listed with a reason, read again after not_engine_ms() */
  int64_t ok_mono;
  int64_t done_mono; /* when the last scrape finished */
};

struct engines {
  char *node;
  int64_t interval_ms, timeout_ms;
  bool allow_endpoints;
  bool discovery; /* the threads run */
  pthread_mutex_t lock;
  pthread_cond_t cond; /* wakes the sleeps on stop */
  atomic_bool stop;
  bool listed;      /* the pod list is current */
  bool kick;        /* a pod turned serving: the scrape thread reads it now, not next interval */
  bool fail_logged; /* the current outage of the pod list was logged */
  char why[ENGINE_REASON_LEN];
  struct epod *pods; /* ENGINE_MAX_PODS slots */
  size_t overflow;   /* engine pods beyond the cap in the last list */
  struct kube_config kcfg;
  struct kube_client *kc;
  CURLM *multi;
  pthread_t watch_thr, scrape_thr;
  bool watch_started, scrape_started;
  struct engine_urls *urls; /* --allow-engine-endpoints: the URLs of triggers, read off the calls */
};

static void copy_str(char *dst, size_t cap, const char *src) {
  size_t n = src ? strnlen(src, cap - 1) : 0;
  if (n)
    memcpy(dst, src, n);
  dst[n] = '\0';
}

/* snprintf for reasons: messages are cut to their buffer, by design. */
static void say(char *dst, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *dst, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(dst, cap, fmt, ap);
  va_end(ap);
}

/* Sleeps ms unless stopped (or, with kick, until a pod turns serving); returns true when
 * stopped. */
static bool nap_until(struct engines *e, int64_t ms, bool kick) {
  int64_t until = time_mono_ms() + ms;
  pthread_mutex_lock(&e->lock);
  while (!atomic_load(&e->stop) && !(kick && e->kick)) {
    int64_t left = until - time_mono_ms();
    if (left <= 0)
      break;
    struct timespec ts = time_mono_deadline(left);
    pthread_cond_timedwait(&e->cond, &e->lock, &ts);
  }
  if (kick)
    e->kick = false;
  pthread_mutex_unlock(&e->lock);
  return atomic_load(&e->stop);
}

static bool nap(struct engines *e, int64_t ms) {
  return nap_until(e, ms, false);
}

/* How long a pod that is not an engine waits for its next check. */
static int64_t not_engine_ms(const struct engines *e) {
  int64_t ms = NOT_ENGINE_ROUNDS * e->interval_ms;
  return ms > NOT_ENGINE_MIN_MS ? ms : NOT_ENGINE_MIN_MS;
}

/* ---- the pod table (callers hold e->lock) ---- */

static struct epod *find_pod(struct engines *e, const char *ns, const char *name) {
  for (size_t i = 0; i < ENGINE_MAX_PODS; i++)
    if (e->pods[i].used && strcmp(e->pods[i].t.ns, ns) == 0 && strcmp(e->pods[i].t.pod, name) == 0)
      return &e->pods[i];
  return NULL;
}

static void drop_pod(struct epod *p, const char *why) {
  LOG_INFO(MOD, "engine pod %s/%s: %s", p->t.ns, p->t.pod, why);
  uint64_t gen = p->gen + 1;
  latwin_free(&p->win);
  memset(p, 0, sizeof *p);
  p->gen = gen;
}

/* Applies one pod from the API: adds, updates or removes its entry. Returns false when the table
 * is full. */
static bool upsert_pod(struct engines *e, const struct kube_pod *kp) {
  struct engine_target t;
  enum engine_target_verdict v = engine_target_from_pod(kp, e->node, &t);
  struct epod *p = kp->ns && kp->name ? find_pod(e, kp->ns, kp->name) : NULL;
  if (v == ENGINE_TARGET_NONE) {
    if (p)
      drop_pod(p, "no longer read (not running, not annotated, or gone)");
    return true;
  }
  if (p) {
    p->present = true;
    if (p->verdict == v && engine_target_same(&p->t, &t))
      return true;
    LOG_INFO(MOD, "engine pod %s/%s: its target changed", t.ns, t.pod);
  }
  if (!p)
    for (size_t i = 0; i < ENGINE_MAX_PODS && !p; i++)
      if (!e->pods[i].used)
        p = &e->pods[i];
  if (!p)
    return false;
  /* A detected engine stays detected through a change of state (Ready, then not, then again). */
  enum engine_kind kept = p->used && p->t.detect && t.detect ? p->r.kind : ENGINE_UNKNOWN;
  uint64_t gen = p->gen + 1;
  latwin_free(&p->win);
  memset(p, 0, sizeof *p);
  p->used = p->present = true;
  p->gen = gen;
  p->verdict = v;
  p->t = t;
  copy_str(p->r.ns, sizeof p->r.ns, t.ns);
  copy_str(p->r.pod, sizeof p->r.pod, t.pod);
  p->r.kind = t.detect ? kept : t.kind;
  p->r.state = t.state;
  if (v == ENGINE_TARGET_BAD) {
    copy_str(p->r.reason, sizeof p->r.reason, t.reason);
    LOG_WARN(MOD, "engine pod %s/%s is not read: %s", t.ns, t.pod, t.reason);
  } else if (t.state != ENGINE_POD_SERVING) {
    /* Not Ready, terminating or a LeaderWorkerSet worker: no Service traffic or no metrics, so
     * it is listed with why and not fetched (a loading engine's port refuses anyway). */
    copy_str(p->r.reason, sizeof p->r.reason, t.reason);
    LOG_INFO(MOD, "engine pod %s/%s is not read: %s", t.ns, t.pod, t.reason);
  } else {
    char url[URL_MAX];
    engine_target_url(&t, url, sizeof url);
    say(p->r.reason, sizeof p->r.reason, "not scraped yet");
    e->kick = true; /* a serving pod with no reading: read it now (it may have just turned
                       Ready, and a Ready pod without a reading is missing) */
    pthread_cond_broadcast(&e->cond);
    LOG_INFO(MOD, "engine pod %s/%s: %s %s", t.ns, t.pod,
             t.detect ? "engine detected from the metrics of" : engine_kind_name(t.kind), url);
  }
  return true;
}

/* A failed pod list: engine metrics are off until it answers (logged once per outage). */
static void list_failed(struct engines *e, const char *why) {
  pthread_mutex_lock(&e->lock);
  bool log = !e->fail_logged;
  e->fail_logged = true;
  e->listed = false;
  copy_str(e->why, sizeof e->why, why);
  pthread_mutex_unlock(&e->lock);
  if (log)
    LOG_WARN(MOD, "engine metrics are off until the pod list answers: %s", why);
}

static void apply_list(struct engines *e, const struct kube_pod_list *l) {
  pthread_mutex_lock(&e->lock);
  for (size_t i = 0; i < ENGINE_MAX_PODS; i++)
    e->pods[i].present = false;
  size_t over = 0, n = 0;
  for (size_t i = 0; i < l->n; i++)
    if (!upsert_pod(e, &l->items[i]))
      over++;
  for (size_t i = 0; i < ENGINE_MAX_PODS; i++) {
    if (e->pods[i].used && !e->pods[i].present)
      drop_pod(&e->pods[i], "gone from the pod list");
    n += e->pods[i].used;
  }
  if (over && over != e->overflow)
    LOG_WARN(MOD, "%zu engine pods beyond the %d an agent reads are not read", over,
             ENGINE_MAX_PODS);
  bool first = !e->listed;
  if (e->fail_logged)
    LOG_INFO(MOD, "the pod list answers again: engine metrics are on");
  e->fail_logged = false;
  e->overflow = over;
  e->listed = true;
  e->why[0] = '\0';
  pthread_mutex_unlock(&e->lock);
  if (first)
    LOG_INFO(MOD, "pod list of node %s: %zu pods, %zu to read as engines", e->node, l->n, n);
}

static int on_watch_event(void *ud, const char *type, const struct kube_pod *kp) {
  struct engines *e = ud;
  pthread_mutex_lock(&e->lock);
  if (strcmp(type, "DELETED") == 0) {
    struct epod *p = find_pod(e, kp->ns, kp->name);
    if (p)
      drop_pod(p, "deleted");
  } else if (!upsert_pod(e, kp)) {
    e->overflow++;
    LOG_WARN(MOD, "engine pod %s/%s is not read: already %d engine pods on this node", kp->ns,
             kp->name, ENGINE_MAX_PODS);
  }
  pthread_mutex_unlock(&e->lock);
  return 0;
}

static void *watch_main(void *arg) {
  struct engines *e = arg;
  int64_t backoff = BACKOFF_MIN_MS;
  while (!atomic_load(&e->stop)) {
    struct kube_pod_list l;
    struct kube_result res;
    int rc = kube_list_pods_on_node(e->kc, e->node, &l, &res);
    if (rc) {
      char why[ENGINE_REASON_LEN];
      say(why, sizeof why, "cannot list this node's pods: %s", res.message);
      list_failed(e, why);
      LOG_DEBUG(MOD, "%s; again in %llds", why, (long long)backoff / 1000);
      kube_pod_list_free(&l);
      if (nap(e, backoff))
        break;
      backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
      continue;
    }
    apply_list(e, &l);
    char rv[128] = "";
    copy_str(rv, sizeof rv, l.resource_version);
    kube_pod_list_free(&l);
    backoff = BACKOFF_MIN_MS;
    while (!atomic_load(&e->stop)) {
      int64_t t0 = time_mono_ms();
      rc = kube_watch_pods_on_node(e->kc, e->node, rv, sizeof rv, WATCH_TIMEOUT_S, on_watch_event,
                                   e, &e->stop, &res);
      if (rc == 0 && time_mono_ms() - t0 < BACKOFF_MIN_MS)
        nap(e, BACKOFF_MIN_MS); /* a server that ends watches at once is not asked in a loop */
      if (rc == 0)
        continue; /* the server's timeout, or stop: watch again from rv */
      if (res.http_status == 410)
        LOG_DEBUG(MOD, "watch: resourceVersion %s is too old, listing again", rv);
      else {
        LOG_WARN(MOD, "pod watch failed, listing again: %s", res.message);
        nap(e, backoff);
        backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
      }
      break;
    }
  }
  return NULL;
}

/* ---- one scrape ---- */

struct scrape {
  CURL *h;
  char url[URL_MAX];
  struct buf body;
  bool too_big;
  char errbuf[CURL_ERROR_SIZE];
  struct curl_slist *hdrs, *resolve;
  /* for a pod */
  size_t idx;
  uint64_t gen;
  struct engine_target t;
  struct engine_prev prev;
  enum engine_kind last_kind;
  int64_t last_ts;
};

static size_t on_scrape_body(char *p, size_t size, size_t n, void *ud) {
  struct scrape *s = ud;
  int rc = buf_append(&s->body, p, size * n);
  if (rc == GS_ETOOBIG)
    s->too_big = true;
  return rc ? 0 : size * n;
}

static int scrape_setup(struct scrape *s, int64_t timeout_ms, const char *protocols) {
  buf_init(&s->body, PROMTEXT_MAX_BYTES);
  if (!(s->h = curl_easy_init()))
    return GS_ENOMEM;
  s->hdrs = curl_slist_append(NULL, "Accept: text/plain;version=0.0.4;q=1,*/*;q=0.1");
  CURL *h = s->h;
  curl_easy_setopt(h, CURLOPT_URL, s->url);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, protocols);
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(h, CURLOPT_NOPROXY, "*"); /* pod IPs and checked addresses, never a proxy */
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_ms);
  curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)PROMTEXT_MAX_BYTES);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, s->hdrs);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "gpuscale/" GPUSCALE_VERSION);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_scrape_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, s);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, s->errbuf);
  curl_easy_setopt(h, CURLOPT_PRIVATE, s);
  return 0;
}

static void scrape_cleanup(struct scrape *s) {
  if (s->h)
    curl_easy_cleanup(s->h);
  curl_slist_free_all(s->hdrs);
  curl_slist_free_all(s->resolve);
  buf_free(&s->body);
  s->h = NULL;
  s->hdrs = s->resolve = NULL;
}

/* Turns a finished transfer into a reading. kind: the declared engine, or ENGINE_UNKNOWN to
 * detect it. Returns 0 (out holds values), GS_EUNAVAIL (out->reason says why), or GS_ENOTFOUND
 * when detection found no engine. out->kind and ts_ms keep last_kind / last_ts on failure. */
static int scrape_result(struct scrape *s, CURLcode cc, int64_t timeout_ms, enum engine_kind kind,
                         struct engine_prev *prev, struct engine_reading *out) {
  out->valid = 0;
  memset(out->v, 0, sizeof out->v);
  out->kind = kind != ENGINE_UNKNOWN ? kind : s->last_kind;
  out->ts_ms = s->last_ts;
  long status = 0;
  curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &status);
  if (s->too_big || cc == CURLE_FILESIZE_EXCEEDED) {
    say(out->reason, sizeof out->reason, "GET %.100s: answer over %u bytes, not read", s->url,
        PROMTEXT_MAX_BYTES);
    return GS_EUNAVAIL;
  }
  if (cc == CURLE_OPERATION_TIMEDOUT) {
    say(out->reason, sizeof out->reason, "GET %.100s: no answer within %lld ms", s->url,
        (long long)timeout_ms);
    return GS_EUNAVAIL;
  }
  if (cc != CURLE_OK) {
    say(out->reason, sizeof out->reason, "GET %.100s: %.80s", s->url,
        s->errbuf[0] ? s->errbuf : curl_easy_strerror(cc));
    return GS_EUNAVAIL;
  }
  if (status != 200) {
    say(out->reason, sizeof out->reason, "GET %.100s: HTTP status %ld, expected 200", s->url,
        status);
    return GS_EUNAVAIL;
  }
  struct prom_doc doc;
  char perr[128] = "";
  int rc = promtext_parse(s->body.data ? s->body.data : "", s->body.len, &doc, perr, sizeof perr);
  if (rc) {
    say(out->reason, sizeof out->reason, "GET %.100s: not the Prometheus text format: %.60s",
        s->url, perr);
    return GS_EUNAVAIL;
  }
  if (kind == ENGINE_UNKNOWN && engine_detect(&doc) == ENGINE_UNKNOWN) {
    promtext_free(&doc);
    say(out->reason, sizeof out->reason,
        "%.100s serves none of vLLM's, TGI's, SGLang's or Triton's metrics", s->url);
    return GS_ENOTFOUND;
  }
  engine_read(kind, &doc, time_wall_ms(), prev, out);
  promtext_free(&doc);
  return 0;
}

/* ---- the scrape thread ---- */

/* Stores a finished pod scrape, unless its pod changed or left meanwhile. */
static void store_pod(struct engines *e, struct scrape *s, CURLcode cc) {
  struct engine_reading r;
  memset(&r, 0, sizeof r);
  int rc =
      scrape_result(s, cc, e->timeout_ms, s->t.detect ? ENGINE_UNKNOWN : s->t.kind, &s->prev, &r);
  pthread_mutex_lock(&e->lock);
  struct epod *p = &e->pods[s->idx];
  if (p->used && p->gen == s->gen) {
    bool was_ok = p->ok || !p->scraped;
    copy_str(r.ns, sizeof r.ns, p->t.ns);
    copy_str(r.pod, sizeof r.pod, p->t.pod);
    p->r = r;
    p->prev = s->prev;
    if (rc == 0 && latwin_wanted(&r) && latwin_push(&p->win, &r))
      LOG_WARN(MOD, "engine pod %s/%s: out of memory keeping its latency window", p->t.ns,
               p->t.pod);
    p->scraped = true;
    p->ok = rc == 0;
    /* Once detected, the kind stays: a later scrape without engine metrics is a failed one. */
    p->not_engine = rc == GS_ENOTFOUND && r.kind == ENGINE_UNKNOWN;
    p->done_mono = time_mono_ms();
    if (p->ok)
      p->ok_mono = p->done_mono;
    if (p->not_engine) {
      say(p->r.reason, sizeof p->r.reason,
          "not an engine (no vllm/tgi/sglang/triton metrics at %.100s); checked again every %llds",
          s->url, (long long)(not_engine_ms(e) / 1000));
      if (was_ok)
        LOG_INFO(MOD, "pod %s/%s: %s", p->t.ns, p->t.pod, p->r.reason);
    } else if (rc && was_ok)
      LOG_WARN(MOD, "engine pod %s/%s: %s", p->t.ns, p->t.pod, r.reason);
    else if (!rc && !was_ok)
      LOG_INFO(MOD, "engine pod %s/%s answers again", p->t.ns, p->t.pod);
  }
  pthread_mutex_unlock(&e->lock);
}

/* Takes the pods to read now; returns how many (jobs has ENGINE_MAX_PODS slots). */
static size_t take_jobs(struct engines *e, struct scrape *jobs) {
  size_t n = 0;
  int64_t now = time_mono_ms();
  pthread_mutex_lock(&e->lock);
  for (size_t i = 0; i < ENGINE_MAX_PODS; i++) {
    const struct epod *p = &e->pods[i];
    if (!p->used || p->verdict != ENGINE_TARGET_OK || p->t.state != ENGINE_POD_SERVING)
      continue;
    if (p->not_engine && now - p->done_mono < not_engine_ms(e))
      continue; /* not an engine at its last check: not fetched every interval */
    struct scrape *s = &jobs[n];
    memset(s, 0, sizeof *s);
    s->idx = i;
    s->gen = p->gen;
    s->t = p->t;
    s->prev = p->prev;
    s->last_kind = p->r.kind;
    s->last_ts = p->r.ts_ms;
    if (engine_target_url(&p->t, s->url, sizeof s->url) == 0)
      n++;
  }
  pthread_mutex_unlock(&e->lock);
  return n;
}

static void scrape_round(struct engines *e, struct scrape *jobs) {
  size_t n = take_jobs(e, jobs);
  size_t added = 0;
  for (size_t i = 0; i < n; i++) {
    if (scrape_setup(&jobs[i], e->timeout_ms, "http") == 0 &&
        curl_multi_add_handle(e->multi, jobs[i].h) == CURLM_OK)
      added++;
    else
      scrape_cleanup(&jobs[i]);
  }
  int running = (int)added;
  while (running > 0 && !atomic_load(&e->stop)) {
    if (curl_multi_perform(e->multi, &running) != CURLM_OK)
      break;
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(e->multi, &left)) != NULL) {
      if (m->msg != CURLMSG_DONE)
        continue;
      struct scrape *s = NULL;
      curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&s);
      CURLcode cc = m->data.result;
      store_pod(e, s, cc); /* each pod as soon as it is done: a slow one delays nobody */
      curl_multi_remove_handle(e->multi, s->h);
      scrape_cleanup(s);
    }
    if (running > 0)
      curl_multi_poll(e->multi, NULL, 0, 1000, NULL);
  }
  for (size_t i = 0; i < n; i++) /* stopped mid-round */
    if (jobs[i].h) {
      curl_multi_remove_handle(e->multi, jobs[i].h);
      scrape_cleanup(&jobs[i]);
    }
}

static void *scrape_main(void *arg) {
  struct engines *e = arg;
  struct scrape *jobs = calloc(ENGINE_MAX_PODS, sizeof *jobs);
  if (!jobs) {
    LOG_ERROR(MOD, "out of memory: engine pods are not read");
    return NULL;
  }
  while (!atomic_load(&e->stop)) {
    int64_t start = time_mono_ms();
    scrape_round(e, jobs);
    int64_t left = e->interval_ms - (time_mono_ms() - start);
    if (nap_until(e, left > 0 ? left : 0, true))
      break;
  }
  free(jobs);
  return NULL;
}

/* ---- life cycle ---- */

static int url_read(void *ud, const char *url, enum engine_kind kind, struct engine_prev *prev,
                    struct engine_reading *out, const atomic_bool *stop);

static int engines_alloc(const struct engines_config *cfg, struct engines **out) {
  struct engines *e = calloc(1, sizeof *e);
  if (!e)
    return GS_ENOMEM;
  pthread_mutex_init(&e->lock, NULL);
  cond_init_mono(&e->cond);
  atomic_init(&e->stop, false);
  e->interval_ms = cfg->interval_ms > 0 ? cfg->interval_ms : 5000;
  e->timeout_ms =
      cfg->timeout_ms > 0 && cfg->timeout_ms < e->interval_ms ? cfg->timeout_ms : e->interval_ms;
  e->allow_endpoints = cfg->allow_endpoints;
  e->node = strdup(cfg->node ? cfg->node : "");
  *out = e;
  if (!e->node)
    return GS_ENOMEM;
  if (!e->allow_endpoints)
    return 0;
  int64_t keep = ENGINE_URL_KEEP_ROUNDS * e->interval_ms;
  struct engine_urls_config ucfg = {
      e->interval_ms, keep > ENGINE_URL_KEEP_MS ? keep : ENGINE_URL_KEEP_MS, url_read, e};
  return engine_urls_new(&ucfg, &e->urls);
}

int engines_start(const struct engines_config *cfg, struct engines **out, char *why,
                  size_t whylen) {
  *out = NULL;
  why[0] = '\0';
  if (cfg->interval_ms <= 0 || cfg->timeout_ms <= 0) {
    say(why, whylen, "--engine-interval and --engine-timeout must be positive");
    return GS_EINVAL;
  }
  if (cfg->timeout_ms > cfg->interval_ms)
    LOG_WARN(MOD,
             "--engine-timeout=%lldms is longer than --engine-interval=%lldms: a scrape may take "
             "%lldms at most, so that each round ends before the next",
             (long long)cfg->timeout_ms, (long long)cfg->interval_ms, (long long)cfg->interval_ms);
  struct engines *e = NULL;
  int rc = engines_alloc(cfg, &e);
  if (rc) {
    engines_stop(e);
    say(why, whylen, "out of memory");
    return rc;
  }
  bool have = false;
  char msg[512] = "";
  if (cfg->mode && strcmp(cfg->mode, "off") == 0)
    say(e->why, sizeof e->why, "--engines off");
  else if ((rc = agent_kube_access(cfg->kube_api, cfg->node, &e->kcfg, &have, msg, sizeof msg)))
    say(why, whylen, "%s", msg);
  else if (!have)
    say(e->why, sizeof e->why, "no Kubernetes API access to find engine pods: %.150s", msg);
  if (rc) {
    engines_stop(e);
    return rc;
  }
  if (have) {
    e->kcfg.timeout_ms = LIST_TIMEOUT_MS;
    /* The table only when pods are read: an agent without engines keeps its memory. */
    if (!(e->pods = calloc(ENGINE_MAX_PODS, sizeof *e->pods)) ||
        (rc = kube_client_new(&e->kcfg, &e->kc)) || !(e->multi = curl_multi_init())) {
      engines_stop(e);
      say(why, whylen, "cannot open a Kubernetes client or a libcurl multi handle");
      return rc ? rc : GS_ENOMEM;
    }
    say(e->why, sizeof e->why, "the pod list has not answered yet");
    e->discovery = true;
    e->watch_started = pthread_create(&e->watch_thr, NULL, watch_main, e) == 0;
    e->scrape_started =
        e->watch_started && pthread_create(&e->scrape_thr, NULL, scrape_main, e) == 0;
    if (!e->scrape_started) {
      engines_stop(e);
      say(why, whylen, "cannot start the engine threads");
      return GS_EIO;
    }
  }
  copy_str(why, whylen, e->discovery ? "" : e->why);
  *out = e;
  return 0;
}

void engines_stop(struct engines *e) {
  if (!e)
    return;
  pthread_mutex_lock(&e->lock);
  atomic_store(&e->stop, true);
  pthread_cond_broadcast(&e->cond);
  pthread_mutex_unlock(&e->lock);
  if (e->multi)
    curl_multi_wakeup(e->multi);
  engine_urls_free(e->urls); /* its reads see stop and end */
  if (e->watch_started)
    pthread_join(e->watch_thr, NULL);
  if (e->scrape_started)
    pthread_join(e->scrape_thr, NULL);
  if (e->multi)
    curl_multi_cleanup(e->multi);
  kube_client_free(e->kc);
  kube_config_free(&e->kcfg);
  pthread_cond_destroy(&e->cond);
  pthread_mutex_destroy(&e->lock);
  for (size_t i = 0; e->pods && i < ENGINE_MAX_PODS; i++)
    latwin_free(&e->pods[i].win);
  free(e->pods);
  free(e->node);
  free(e);
}

static bool is_fresh(bool ok, int64_t ok_mono, int64_t interval_ms, int64_t now) {
  return ok && now - ok_mono <= 3 * interval_ms;
}

int engines_copy(struct engines *e, struct engine_reading **out, size_t *n, bool *on, char *why,
                 size_t whylen) {
  return engines_copy_window(e, 0, out, n, on, why, whylen);
}

int engines_copy_window(struct engines *e, int64_t window_ms, struct engine_reading **out,
                        size_t *n, bool *on, char *why, size_t whylen) {
  *out = NULL;
  *n = 0;
  *on = false;
  if (!e) {
    if (why && whylen)
      copy_str(why, whylen, "engine metrics are not started");
    return 0;
  }
  pthread_mutex_lock(&e->lock);
  *on = e->discovery && e->listed;
  if (why && whylen)
    copy_str(why, whylen, *on ? "" : e->why);
  if (!e->pods) { /* no discovery */
    pthread_mutex_unlock(&e->lock);
    return 0;
  }
  size_t cnt = 0; /* pods that are not engines too: listed with their reason, kind unknown */
  for (size_t i = 0; i < ENGINE_MAX_PODS; i++)
    cnt += e->pods[i].used;
  struct engine_reading *r = cnt ? calloc(cnt, sizeof *r) : NULL;
  if (cnt && !r) {
    pthread_mutex_unlock(&e->lock);
    return GS_ENOMEM;
  }
  int64_t now = time_mono_ms();
  size_t k = 0;
  for (size_t i = 0; i < ENGINE_MAX_PODS; i++) {
    const struct epod *p = &e->pods[i];
    if (!p->used)
      continue;
    r[k] = p->r;
    if (p->ok)
      latwin_apply(&p->win, window_ms, &r[k]);
    r[k].fresh = is_fresh(p->ok, p->ok_mono, e->interval_ms, now);
    if (p->ok && !r[k].fresh && !r[k].reason[0])
      say(r[k].reason, sizeof r[k].reason, "the last good scrape is over 3 intervals old");
    k++;
  }
  pthread_mutex_unlock(&e->lock);
  *out = r;
  *n = k;
  return 0;
}

int64_t engines_interval_ms(const struct engines *e) {
  return e ? e->interval_ms : 0;
}

bool engines_endpoints_allowed(const struct engines *e) {
  return e && e->allow_endpoints;
}

/* ---- engines_scrape_url ---- */

static int on_url_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                           curl_off_t ulnow) {
  (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
  return atomic_load((const atomic_bool *)ud) ? 1 : 0; /* stopping: abandon the request */
}

/* engine_urls_read_fn, on a URL's refresher thread (engine_urls.c): the name lookup and the
 * check of every address, then one request to the checked address. */
static int url_read(void *ud, const char *url, enum engine_kind kind, struct engine_prev *prev,
                    struct engine_reading *out, const atomic_bool *stop) {
  struct engines *e = ud;
  struct engine_endpoint ep;
  char err[ENGINE_REASON_LEN] = "";
  int rc = engine_endpoint_resolve(url, &ep, err, sizeof err);
  if (rc) {
    out->kind = kind;
    copy_str(out->reason, sizeof out->reason, err);
    return rc;
  }
  struct scrape s;
  memset(&s, 0, sizeof s);
  copy_str(s.url, sizeof s.url, url);
  s.last_kind = kind;
  s.last_ts = prev->have ? prev->ts_ms : 0;
  if (scrape_setup(&s, e->timeout_ms, "http,https")) {
    scrape_cleanup(&s);
    copy_str(out->reason, sizeof out->reason, "out of memory");
    return GS_EUNAVAIL;
  }
  char pin[400];
  snprintf(pin, sizeof pin, strchr(ep.addr, ':') ? "%s:%d:[%s]" : "%s:%d:%s", ep.host, ep.port,
           ep.addr);
  if (!strchr(ep.host, ':')) { /* a name: connect to the address that was checked, only */
    s.resolve = curl_slist_append(NULL, pin);
    curl_easy_setopt(s.h, CURLOPT_RESOLVE, s.resolve);
  }
  curl_easy_setopt(s.h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(s.h, CURLOPT_XFERINFOFUNCTION, on_url_progress);
  curl_easy_setopt(s.h, CURLOPT_XFERINFODATA, (void *)stop);
  CURLcode cc = curl_easy_perform(s.h);
  rc = scrape_result(&s, cc, e->timeout_ms, kind, prev, out);
  scrape_cleanup(&s);
  return rc == GS_ENOTFOUND ? GS_EUNAVAIL : rc;
}

int engines_scrape_url(struct engines *e, const char *url, enum engine_kind kind,
                       struct engine_reading *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  if (!engines_endpoints_allowed(e) || !e->urls) {
    snprintf(err, errlen,
             "engine endpoints from triggers are not read: the agent runs without "
             "--allow-engine-endpoints; annotate the engine pods instead (docs/engines.md)");
    return GS_EINVAL;
  }
  if (!url || strlen(url) >= ENGINE_URLS_URL_MAX) {
    snprintf(err, errlen, "endpoint URL longer than %d bytes", ENGINE_URLS_URL_MAX - 1);
    return GS_EINVAL;
  }
  int rc = engine_endpoint_check(url, err, errlen); /* no name lookup: that is the refresher's */
  if (rc)
    return rc;
  return engine_urls_get(e->urls, url, kind, out, err, errlen);
}
