/* libFuzzer target for what gpuscale reads from an HTTP request itself (libmicrohttpd parses the
 * rest): the route of a path and Accept-Encoding. Input: the path, a newline, the header value.
 * Checked: a route is found exactly for its path; the gzip answer does not change with case,
 * with an ", identity" element appended, and is yes only when gzip or "*" is named. */
#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX 8192

static void nop(void *ud, const struct http_request *req, struct http_response *resp) {
  (void)ud;
  (void)req;
  (void)resp;
}

static const struct http_route routes[] = {
    {"/metrics", nop, NULL},     {"/healthz", nop, NULL},        {"/readyz", nop, NULL},
    {"/api/v1/gpus", nop, NULL}, {"/api/v1/engines", nop, NULL},
};
#define NROUTES (sizeof routes / sizeof *routes)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > FUZZ_MAX)
    size = FUZZ_MAX;
  char *text = malloc(2 * size + 32);
  if (!text)
    return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  char *nl = memchr(text, '\n', size);
  const char *path = text, *ae = NULL;
  if (nl) {
    *nl = '\0';
    ae = nl + 1;
  }
  const struct http_route *r = http_route_find(routes, NROUTES, path);
  size_t want = NROUTES;
  for (size_t i = 0; i < NROUTES && want == NROUTES; i++)
    if (strlen(routes[i].path) == strlen(path) && memcmp(routes[i].path, path, strlen(path)) == 0)
      want = i;
  if ((want == NROUTES) != (r == NULL) || (r && r != &routes[want]))
    abort();

  bool yes = http_accepts_gzip(ae);
  if (ae) {
    size_t n = strlen(ae);
    char *more = text + size + 1; /* ae + ", identity" and its upper case, after the input */
    char *upper = malloc(n + 1);
    if (upper) {
      for (size_t i = 0; i <= n; i++)
        upper[i] = (char)toupper((unsigned char)ae[i]);
      if (http_accepts_gzip(upper) != yes)
        abort();
      free(upper);
    }
    memcpy(more, ae, n);
    memcpy(more + n, ", identity", 11);
    if (http_accepts_gzip(more) != yes)
      abort();
    if (yes && !strchr(ae, '*') && !strcasestr(ae, "gzip"))
      abort();
  } else if (yes) {
    abort();
  }
  free(text);
  return 0;
}
