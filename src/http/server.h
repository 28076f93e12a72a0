/* Small HTTP server on libmicrohttpd: GET routes that render into a capped buffer. */
#ifndef GS_HTTP_SERVER_H
#define GS_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "core/buf.h"

#define HTTP_BODY_MAX (8u * 1024 * 1024)

struct http_request {
  const char *method; /* "GET" or "HEAD"; other methods are answered 405 before routing */
  const char *path;
  bool accepts_gzip; /* Accept-Encoding lists gzip */
};

struct http_response {
  int status;               /* default 200 */
  const char *content_type; /* static string; default "text/plain; charset=utf-8" */
  struct buf body;          /* initialised with HTTP_BODY_MAX; the server frees it */
  /* Static string sent as Content-Encoding (e.g. "gzip" when the handler compressed the body
   * because req->accepts_gzip); NULL (the default) sends none. */
  const char *content_encoding;
};

struct http_route {
  const char *path; /* exact match */
  void (*handle)(void *ud, const struct http_request *req, struct http_response *resp);
  void *ud;
};

struct http_server;

/* Starts serving routes (copied; ud pointers must outlive the server) on HOST:PORT with its own
 * threads. Returns 0 and *out, or GS_EIO/GS_EINVAL with err naming the address. */
int http_server_start(const char *listen, const struct http_route *routes, size_t n,
                      struct http_server **out, char *err, size_t errlen);
/* Port actually bound (useful with port 0). */
int http_server_port(const struct http_server *s);
/* Stops, joins threads and frees. http_server_stop(NULL) is fine. */
void http_server_stop(struct http_server *s);

#endif
