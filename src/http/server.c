/* libmicrohttpd wiring: address parsing, method checks, route dispatch. */
#include "http/server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "core/err.h"
#include "core/log.h"
#include "http/request.h"

struct http_server {
  struct MHD_Daemon *d;
  struct http_route *routes;
  size_t n;
  int port;
};

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, const char *text) {
  struct MHD_Response *r =
      MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
  if (!r)
    return MHD_NO;
  MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
  if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
    MHD_add_response_header(r, "Allow", "GET, HEAD");
  enum MHD_Result ret = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls) {
  struct http_server *s = cls;
  if (*con_cls == NULL) { /* first call for this request: headers only */
    *con_cls = s;
    return MHD_YES;
  }
  if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
    return send_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed; use GET\n");
  if (*upload_size) /* ignore any body */
    *upload_size = 0;

  const struct http_route *route = http_route_find(s->routes, s->n, url);
  if (!route)
    return send_text(c, MHD_HTTP_NOT_FOUND, "not found\n");

  const char *ae = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept-Encoding");
  struct http_request req = {method, url, http_accepts_gzip(ae)};
  struct http_response resp = {200, "text/plain; charset=utf-8", {0}, NULL};
  buf_init(&resp.body, HTTP_BODY_MAX);
  route->handle(route->ud, &req, &resp);
  size_t len = resp.body.len;
  char *data = buf_steal(&resp.body);
  struct MHD_Response *r = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(data);
    return MHD_NO;
  }
  MHD_add_response_header(r, "Content-Type", resp.content_type);
  MHD_add_response_header(r, "Cache-Control", "no-store");
  if (resp.content_encoding) {
    MHD_add_response_header(r, "Content-Encoding", resp.content_encoding);
    MHD_add_response_header(r, "Vary", "Accept-Encoding");
  }
  enum MHD_Result ret = MHD_queue_response(c, (unsigned)resp.status, r);
  MHD_destroy_response(r);
  return ret;
}

static int resolve(const char *listen, struct sockaddr_storage *ss, socklen_t *sl, char *err,
                   size_t errlen) {
  char host[256];
  const char *colon = strrchr(listen, ':');
  if (!colon || (size_t)(colon - listen) >= sizeof host) {
    snprintf(err, errlen, "http listen address \"%s\" must be HOST:PORT", listen);
    return GS_EINVAL;
  }
  size_t hl = (size_t)(colon - listen);
  memcpy(host, listen, hl);
  host[hl] = '\0';
  if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
    memmove(host, host + 1, hl - 2);
    host[hl - 2] = '\0';
  }
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  int rc = getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &res);
  if (rc != 0 || !res) {
    snprintf(err, errlen, "http listen address \"%s\": %s", listen, gai_strerror(rc));
    return GS_EINVAL;
  }
  memcpy(ss, res->ai_addr, res->ai_addrlen);
  *sl = res->ai_addrlen;
  freeaddrinfo(res);
  return 0;
}

int http_server_start(const char *listen, const struct http_route *routes, size_t n,
                      struct http_server **out, char *err, size_t errlen) {
  struct sockaddr_storage ss;
  socklen_t sl;
  int rc = resolve(listen, &ss, &sl, err, errlen);
  if (rc)
    return rc;
  struct http_server *s = calloc(1, sizeof *s);
  if (!s || !(s->routes = calloc(n ? n : 1, sizeof *routes))) {
    free(s);
    return GS_ENOMEM;
  }
  memcpy(s->routes, routes, n * sizeof *routes);
  s->n = n;
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL_LINUX_ONLY | MHD_USE_ERROR_LOG;
  if (ss.ss_family == AF_INET6)
    flags |= MHD_USE_IPv6;
  s->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
                          (struct sockaddr *)&ss, MHD_OPTION_THREAD_POOL_SIZE, 2u,
                          MHD_OPTION_CONNECTION_LIMIT, 256u, MHD_OPTION_CONNECTION_TIMEOUT, 30u,
                          MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024, MHD_OPTION_END);
  if (!s->d) {
    snprintf(err, errlen, "cannot listen for HTTP on %s (address in use or not permitted)", listen);
    free(s->routes);
    free(s);
    return GS_EIO;
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
  s->port = info ? info->port : 0;
  *out = s;
  return 0;
}

int http_server_port(const struct http_server *s) {
  return s->port;
}

void http_server_stop(struct http_server *s) {
  if (!s)
    return;
  MHD_stop_daemon(s->d);
  free(s->routes);
  free(s);
}
