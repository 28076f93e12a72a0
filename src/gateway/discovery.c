/* Agent discovery: static lists and periodic DNS resolution of a headless Service. */
#include "gateway/discovery.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "core/err.h"
#include "core/log.h"
#include "core/timeutil.h"

void discovery_targets_free(char **t, size_t n) {
  if (!t)
    return;
  for (size_t i = 0; i < n; i++)
    free(t[i]);
  free(t);
}

/* Splits HOST:PORT (HOST may be [v6]); returns 0 with host copied, or GS_EINVAL. */
static int split_host_port(const char *s, char *host, size_t hostlen, long *port) {
  const char *colon = strrchr(s, ':');
  if (!colon || colon == s || (size_t)(colon - s) >= hostlen)
    return GS_EINVAL;
  size_t hl = (size_t)(colon - s);
  memcpy(host, s, hl);
  host[hl] = '\0';
  if (host[0] == '[') {
    if (hl < 3 || host[hl - 1] != ']')
      return GS_EINVAL;
    memmove(host, host + 1, hl - 2);
    host[hl - 2] = '\0';
  }
  char *end;
  errno = 0;
  *port = strtol(colon + 1, &end, 10);
  if (!colon[1] || *end || errno || *port < 1 || *port > 65535)
    return GS_EINVAL;
  return 0;
}

static int push(char ***arr, size_t *n, const char *s) {
  for (size_t i = 0; i < *n; i++)
    if (strcmp((*arr)[i], s) == 0)
      return 0;
  if (*n >= DISCOVERY_MAX_TARGETS)
    return GS_ETOOBIG;
  char **na = realloc(*arr, (*n + 1) * sizeof *na);
  if (!na)
    return GS_ENOMEM;
  *arr = na;
  if (!(na[*n] = strdup(s)))
    return GS_ENOMEM;
  (*n)++;
  return 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int discovery_parse_static(const char *list, char ***out, size_t *n, char *err, size_t errlen) {
  char **arr = NULL;
  size_t cnt = 0;
  const char *p = list;
  while (*p) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    char item[300], host[256];
    long port;
    if (len == 0 || len >= sizeof item) {
      snprintf(err, errlen, "--agents: empty or too long entry in \"%.100s\"", list);
      discovery_targets_free(arr, cnt);
      return GS_EINVAL;
    }
    memcpy(item, p, len);
    item[len] = '\0';
    if (split_host_port(item, host, sizeof host, &port) != 0) {
      snprintf(err, errlen, "--agents: \"%s\" is not HOST:PORT with port 1..65535", item);
      discovery_targets_free(arr, cnt);
      return GS_EINVAL;
    }
    int rc = push(&arr, &cnt, item);
    if (rc) {
      snprintf(err, errlen, "--agents: %s", gs_strerror(rc));
      discovery_targets_free(arr, cnt);
      return rc;
    }
    if (!comma)
      break;
    p = comma + 1;
  }
  if (cnt == 0) {
    snprintf(err, errlen, "--agents: no address given");
    return GS_EINVAL;
  }
  *out = arr;
  *n = cnt;
  return 0;
}

int discovery_resolve(const char *name_port, char ***out, size_t *n, char *err, size_t errlen) {
  char host[256];
  long port;
  if (split_host_port(name_port, host, sizeof host, &port) != 0) {
    snprintf(err, errlen, "--agents-dns: \"%s\" is not NAME:PORT with port 1..65535", name_port);
    return GS_EINVAL;
  }
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(host, NULL, &hints, &res);
  if (rc == EAI_NONAME || rc == EAI_NODATA) {
    *out = NULL;
    *n = 0;
    return 0; /* a headless Service with no ready agents has no records */
  }
  if (rc != 0) {
    snprintf(err, errlen, "--agents-dns: resolving %s: %s", host, gai_strerror(rc));
    return GS_EUNAVAIL;
  }
  char **arr = NULL;
  size_t cnt = 0;
  int prc = 0;
  for (struct addrinfo *ai = res; ai && prc == 0; ai = ai->ai_next) {
    char ip[INET6_ADDRSTRLEN], item[INET6_ADDRSTRLEN + 16];
    if (ai->ai_family == AF_INET) {
      inet_ntop(AF_INET, &((struct sockaddr_in *)ai->ai_addr)->sin_addr, ip, sizeof ip);
      snprintf(item, sizeof item, "%s:%ld", ip, port);
    } else if (ai->ai_family == AF_INET6) {
      inet_ntop(AF_INET6, &((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr, ip, sizeof ip);
      snprintf(item, sizeof item, "[%s]:%ld", ip, port);
    } else {
      continue;
    }
    prc = push(&arr, &cnt, item);
  }
  freeaddrinfo(res);
  if (prc) {
    discovery_targets_free(arr, cnt);
    snprintf(err, errlen, "--agents-dns: %s", gs_strerror(prc));
    return prc;
  }
  if (cnt > 1)
    qsort(arr, cnt, sizeof *arr, cmp_str);
  *out = arr;
  *n = cnt;
  return 0;
}

static void resolve_once(struct discovery *d, struct log_complain *cp) {
  char **t = NULL;
  size_t n = 0;
  char err[512];
  if (discovery_resolve(d->name_port, &t, &n, err, sizeof err) != 0) {
    if (log_complain(cp, time_mono_ms()))
      LOG_WARN("discovery", "%s; keeping the previous %zu agents", err, d->last_n);
    return;
  }
  if (log_complain_clear(cp))
    LOG_INFO("discovery", "%s resolves again", d->name_port);
  if (n != d->last_n)
    LOG_INFO("discovery", "%s: %zu agents", d->name_port, n);
  d->last_n = n;
  d->on_targets(d->ud, (const char *const *)t, n);
  discovery_targets_free(t, n);
}

static void *discovery_main(void *arg) {
  struct discovery *d = arg;
  struct log_complain cp = {0};
  pthread_mutex_lock(&d->lock);
  while (!d->stop) {
    pthread_mutex_unlock(&d->lock);
    resolve_once(d, &cp);
    pthread_mutex_lock(&d->lock);
    struct timespec dl = time_mono_deadline(d->refresh_ms);
    while (!d->stop && pthread_cond_timedwait(&d->cond, &d->lock, &dl) == 0)
      ;
  }
  pthread_mutex_unlock(&d->lock);
  return NULL;
}

int discovery_start(struct discovery *d, const char *name_port, int64_t refresh_ms,
                    void (*on_targets)(void *ud, const char *const *targets, size_t n), void *ud) {
  memset(d, 0, sizeof *d);
  if (!(d->name_port = strdup(name_port)))
    return GS_ENOMEM;
  d->refresh_ms = refresh_ms;
  d->on_targets = on_targets;
  d->ud = ud;
  pthread_mutex_init(&d->lock, NULL);
  cond_init_mono(&d->cond);
  if (pthread_create(&d->thread, NULL, discovery_main, d) != 0) {
    free(d->name_port);
    d->name_port = NULL;
    return GS_EIO;
  }
  d->started = true;
  return 0;
}

void discovery_stop(struct discovery *d) {
  if (!d->started)
    return;
  pthread_mutex_lock(&d->lock);
  d->stop = true;
  pthread_cond_signal(&d->cond);
  pthread_mutex_unlock(&d->lock);
  pthread_join(d->thread, NULL);
  pthread_cond_destroy(&d->cond);
  pthread_mutex_destroy(&d->lock);
  free(d->name_port);
  d->name_port = NULL;
  d->started = false;
}
