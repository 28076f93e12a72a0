/* kube_watch_pods_on_node against a loopback server that plays canned answers: the event types, the
 * resourceVersion kept for the next watch (bookmarks included), 410 Gone as an ERROR event, a
 * refused watch, a malformed or oversized event, the callback's stop, and the stop flag on an idle
 * watch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/err.h"
#include "core/timeutil.h"
#include "rightsize/kube.h"

struct server {
  int fd;
  int port;
  pthread_t thr;
  const char *head;   /* status line and headers, "" for none */
  const char **lines; /* body lines, each sent as one chunk; NULL-terminated */
  size_t big;         /* > 0: one chunk of this many bytes without a newline */
  char fill;          /* the big chunk's byte ('x' when 0) */
  const char *tail;   /* a last chunk after the big one, or NULL */
  int hold_ms;        /* keep the connection open this long after the body */
  char request[2048]; /* the request line and headers received */
};

static void send_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
    if (w <= 0)
      return;
    c += w;
    n -= (size_t)w;
  }
}

static void send_chunk(int fd, const char *p, size_t n) {
  char hdr[32];
  int h = snprintf(hdr, sizeof hdr, "%zx\r\n", n);
  send_all(fd, hdr, (size_t)h);
  send_all(fd, p, n);
  send_all(fd, "\r\n", 2);
}

static void *serve(void *arg) {
  struct server *s = arg;
  int c = accept(s->fd, NULL, NULL);
  if (c < 0)
    return NULL;
  ssize_t n = recv(c, s->request, sizeof s->request - 1, 0);
  s->request[n > 0 ? n : 0] = '\0';
  send_all(c, s->head, strlen(s->head));
  if (strstr(s->head, "chunked")) {
    for (size_t i = 0; s->lines && s->lines[i]; i++)
      send_chunk(c, s->lines[i], strlen(s->lines[i]));
    if (s->big) {
      char *b = malloc(s->big);
      memset(b, s->fill ? s->fill : 'x', s->big);
      send_chunk(c, b, s->big);
      free(b);
    }
    if (s->tail)
      send_chunk(c, s->tail, strlen(s->tail));
    if (s->hold_ms)
      usleep((useconds_t)s->hold_ms * 1000);
    send_all(c, "0\r\n\r\n", 5);
  }
  close(c);
  return NULL;
}

static void server_start(struct server *s) {
  s->fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(s->fd >= 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(s->fd, (struct sockaddr *)&a, sizeof a), 0);
  socklen_t len = sizeof a;
  getsockname(s->fd, (struct sockaddr *)&a, &len);
  s->port = ntohs(a.sin_port);
  assert_int_equal(listen(s->fd, 4), 0);
  assert_int_equal(pthread_create(&s->thr, NULL, serve, s), 0);
}

static void server_stop(struct server *s) {
  pthread_join(s->thr, NULL);
  close(s->fd);
}

static struct kube_client *client_for(const struct server *s) {
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d", s->port);
  struct kube_config cfg = {0};
  cfg.server = url;
  cfg.token = "t0k";
  cfg.timeout_ms = 5000;
  struct kube_client *c = NULL;
  assert_int_equal(kube_client_new(&cfg, &c), 0);
  return c;
}

struct seen {
  int n;
  char types[8][16];
  char pods[8][64];
  char ips[8][32];
  int ret; /* what the callback returns */
};

static int on_event(void *ud, const char *type, const struct kube_pod *p) {
  struct seen *s = ud;
  if (s->n < 8) {
    snprintf(s->types[s->n], sizeof s->types[0], "%s", type);
    snprintf(s->pods[s->n], sizeof s->pods[0], "%s/%s", p->ns, p->name);
    snprintf(s->ips[s->n], sizeof s->ips[0], "%s", p->pod_ip ? p->pod_ip : "");
  }
  s->n++;
  return s->ret;
}

#define CHUNKED                                                                                    \
  "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
#define POD(type, name, rv, ip)                                                                    \
  "{\"type\":\"" type "\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"ml\","        \
  "\"name\":\"" name "\",\"resourceVersion\":\"" rv "\"},\"spec\":{\"nodeName\":\"node-a\"},"      \
  "\"status\":{\"phase\":\"Running\",\"podIP\":\"" ip "\"}}}\n"

static void test_events_and_resource_version(void **state) {
  (void)state;
  /* one event split over two chunks, one chunk with two events */
  const char *lines[] = {
      POD("ADDED", "a", "101", "10.0.0.1"),
      "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"namespace\"",
      ":\"ml\",\"name\":\"a\",\"resourceVersion\":\"102\"},\"status\":{\"podIP\":"
      "\"10.0.0.2\"}}}\n",
      POD("DELETED", "b", "103", "10.0.0.3") "{\"type\":\"BOOKMARK\",\"object\":"
                                             "{\"kind\":\"Pod\",\"metadata\":{"
                                             "\"resourceVersion\":\"150\"}}}\n",
      "{\"type\":\"FUTURE\",\"object\":{}}\n",
      NULL};
  struct server s = {.head = CHUNKED, .lines = lines};
  server_start(&s);
  struct kube_client *c = client_for(&s);
  char rv[64] = "100";
  struct seen seen = {0};
  struct kube_result res;
  int rc = kube_watch_pods_on_node(c, "node-a", rv, sizeof rv, 30, on_event, &seen, NULL, &res);
  server_stop(&s);
  assert_int_equal(rc, 0);
  assert_int_equal(seen.n, 3);
  assert_string_equal(seen.types[0], "ADDED");
  assert_string_equal(seen.ips[0], "10.0.0.1");
  assert_string_equal(seen.types[1], "MODIFIED");
  assert_string_equal(seen.ips[1], "10.0.0.2");
  assert_string_equal(seen.types[2], "DELETED");
  assert_string_equal(seen.pods[2], "ml/b");
  assert_string_equal(rv, "150"); /* the bookmark's */
  assert_non_null(strstr(s.request, "GET /api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a&watch=1"
                                    "&resourceVersion=100&allowWatchBookmarks=true"
                                    "&timeoutSeconds=30 "));
  assert_non_null(strstr(s.request, "Authorization: Bearer t0k"));
  kube_client_free(c);
}

static const struct {
  const char *what;
  const char *head;
  const char *line;
  int want;
  long status;
  const char *msg;
} failures[] = {
    {"410 Gone as an ERROR event", CHUNKED,
     "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\","
     "\"message\":\"too old resource version: 100 (200)\"}}\n",
     GS_EUNAVAIL, 410, "too old resource version"},
    {"not JSON", CHUNKED, "this is not json\n", GS_EPARSE, 200, "not {type, object}"},
    {"a pod without a name", CHUNKED,
     "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"namespace\":\"ml\"}}}\n", GS_EPARSE, 200,
     "ADDED event"},
    {"refused (403)",
     "HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
     NULL, GS_EINVAL, 403, "403"},
    {"server error (503)", "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n", NULL,
     GS_EUNAVAIL, 503, "503"},
};

static void test_failures(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof failures / sizeof failures[0]; i++) {
    const char *lines[] = {failures[i].line, NULL};
    struct server s = {.head = failures[i].head, .lines = lines};
    server_start(&s);
    struct kube_client *c = client_for(&s);
    char rv[64] = "100";
    struct seen seen = {0};
    struct kube_result res;
    int rc = kube_watch_pods_on_node(c, "node-a", rv, sizeof rv, 30, on_event, &seen, NULL, &res);
    server_stop(&s);
    printf("%s: rc %d status %ld %s\n", failures[i].what, rc, res.http_status, res.message);
    assert_int_equal(rc, failures[i].want);
    assert_int_equal(res.http_status, failures[i].status);
    assert_non_null(strstr(res.message, failures[i].msg));
    assert_int_equal(seen.n, 0);
    assert_string_equal(rv, "100");
    kube_client_free(c);
  }
}

static void test_callback_stops_and_caps(void **state) {
  (void)state;
  const char *lines[] = {POD("ADDED", "a", "101", "10.0.0.1"), POD("ADDED", "b", "102", "10.0.0.2"),
                         NULL};
  struct server s = {.head = CHUNKED, .lines = lines};
  server_start(&s);
  struct kube_client *c = client_for(&s);
  char rv[64] = "100";
  struct seen seen = {.ret = 7};
  struct kube_result res;
  assert_int_equal(
      kube_watch_pods_on_node(c, "node-a", rv, sizeof rv, 30, on_event, &seen, NULL, &res), 7);
  server_stop(&s);
  assert_int_equal(seen.n, 1);
  kube_client_free(c);

  /* an event longer than KUBE_WATCH_MAX_EVENT */
  struct server big = {.head = CHUNKED, .big = KUBE_WATCH_MAX_EVENT + 10};
  server_start(&big);
  c = client_for(&big);
  seen.ret = 0;
  seen.n = 0;
  assert_int_equal(
      kube_watch_pods_on_node(c, "node-a", rv, sizeof rv, 30, on_event, &seen, NULL, &res),
      GS_ETOOBIG);
  server_stop(&big);
  assert_non_null(strstr(res.message, "over"));
  kube_client_free(c);

  /* a resourceVersion that is not a token never reaches the query */
  char bad[64] = "1&watch=0";
  assert_int_equal(kube_watch_pods_on_node(c = client_for(&big), "node-a", bad, sizeof bad, 30,
                                           on_event, &seen, NULL, &res),
                   GS_EINVAL);
  kube_client_free(c);
}

/* KUBE_MAX_BODY (32 MiB) on a list answer: a PodList of exactly 32 MiB (leading whitespace, then
 * the object) is read; one byte more is refused with GS_ETOOBIG, the call and the cap named, and
 * nothing handed back. */
static void test_list_body_cap(void **state) {
  (void)state;
  static const char list[] = "{\"kind\":\"PodList\",\"items\":[{\"metadata\":{\"namespace\":\"ml\","
                             "\"name\":\"a\"},\"spec\":{\"nodeName\":\"node-a\"},"
                             "\"status\":{\"phase\":\"Running\"}}]}";
  for (size_t extra = 0; extra <= 1; extra++) {
    struct server s = {.head = CHUNKED,
                       .big = KUBE_MAX_BODY - (sizeof list - 1) + extra,
                       .fill = ' ',
                       .tail = list};
    server_start(&s);
    struct kube_client *c = client_for(&s);
    struct kube_pod_list l;
    struct kube_result res;
    int rc = kube_list_pods_on_node(c, "node-a", &l, &res);
    server_stop(&s);
    if (extra == 0) {
      assert_int_equal(rc, 0);
      assert_int_equal(l.n, 1);
      assert_string_equal(l.items[0].name, "a");
    } else {
      assert_int_equal(rc, GS_ETOOBIG);
      assert_int_equal(l.n, 0);
      assert_string_equal(res.message, "GET /api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a: "
                                       "answer over 33554432 bytes, refused");
    }
    kube_pod_list_free(&l);
    kube_client_free(c);
  }
}

static atomic_bool stop_flag;
static void *set_stop(void *arg) {
  (void)arg;
  usleep(300 * 1000);
  atomic_store(&stop_flag, true);
  return NULL;
}

static void test_stop_flag_ends_an_idle_watch(void **state) {
  (void)state;
  struct server s = {.head = CHUNKED, .hold_ms = 5000};
  server_start(&s);
  struct kube_client *c = client_for(&s);
  char rv[64] = "100";
  struct seen seen = {0};
  struct kube_result res;
  atomic_store(&stop_flag, false);
  pthread_t t;
  pthread_create(&t, NULL, set_stop, NULL);
  int64_t t0 = time_mono_ms();
  int rc =
      kube_watch_pods_on_node(c, "node-a", rv, sizeof rv, 30, on_event, &seen, &stop_flag, &res);
  int64_t took = time_mono_ms() - t0;
  pthread_join(t, NULL);
  assert_int_equal(rc, 0);
  assert_true(took < 3000); /* not the server's 5 s */
  server_stop(&s);
  kube_client_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_events_and_resource_version),  cmocka_unit_test(test_failures),
      cmocka_unit_test(test_callback_stops_and_caps),      cmocka_unit_test(test_list_body_cap),
      cmocka_unit_test(test_stop_flag_ends_an_idle_watch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
