/* What the HTTP server reads from a request besides libmicrohttpd's own parsing: the route for a
 * path and whether Accept-Encoding lets us answer gzip. Pure functions, fuzzed (fuzz_http). */
#ifndef GS_HTTP_REQUEST_H
#define GS_HTTP_REQUEST_H

#include <stdbool.h>
#include <stddef.h>

#include "http/server.h"

/* The route whose path equals path exactly (libmicrohttpd has already split off the query
 * string), or NULL. The first of equal paths wins. */
const struct http_route *http_route_find(const struct http_route *routes, size_t n,
                                         const char *path);

/* True when an Accept-Encoding value (RFC 9110, 12.5.3) lets us send gzip: "gzip" (or its alias
 * "x-gzip") listed with q > 0, or, when neither is listed, "*" with q > 0. The highest q of
 * repeated entries counts. An element whose weight is not a qvalue (0 to 1, at most three
 * decimals) or whose parameters are malformed is ignored. NULL or "": false (identity only). */
bool http_accepts_gzip(const char *accept_encoding);

#endif
