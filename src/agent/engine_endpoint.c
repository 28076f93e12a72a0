/* Which URLs from a trigger may be fetched once the operator allowed it: http(s) to a host whose
 * every address is neither this machine, nor link-local, nor a cloud metadata service. */
#include "agent/engine_endpoint.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "agent/engines.h"
#include "core/err.h"

/* Names of metadata services, refused before any lookup (they also resolve to a blocked
 * address where they exist). */
static const char *const metadata_names[] = {
    "metadata.google.internal",   "metadata.goog",      "metadata",  "instance-data",
    "instance-data.ec2.internal", "metadata.azure.com", "localhost",
};

static bool v4_blocked(const unsigned char *a, const char **why) {
  if (a[0] == 127)
    return *why = "a loopback address", true;
  if (a[0] == 0)
    return *why = "an unspecified address", true;
  if (a[0] == 169 && a[1] == 254)
    return *why = a[2] == 169 && a[3] == 254 ? "the cloud metadata address" : "link-local", true;
  if (a[0] == 100 && a[1] == 100 && a[2] == 100 && a[3] == 200)
    return *why = "a cloud metadata address (Alibaba Cloud)", true;
  if (a[0] == 168 && a[1] == 63 && a[2] == 129 && a[3] == 16)
    return *why = "a cloud metadata address (Azure WireServer)", true;
  return false;
}

static bool v6_blocked(const unsigned char *a, const char **why) {
  static const unsigned char zero[16], mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  static const unsigned char ec2[16] = {0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0,    0,
                                        0,    0,    0,    0,    0, 0, 0x02, 0x54};
  if (memcmp(a, mapped, 12) == 0)
    return v4_blocked(a + 12, why);
  if (memcmp(a, zero, 15) == 0 && (a[15] == 0 || a[15] == 1))
    return *why = a[15] ? "a loopback address" : "an unspecified address", true;
  if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
    return *why = "link-local", true;
  if (memcmp(a, ec2, 16) == 0)
    return *why = "the cloud metadata address (AWS IPv6)", true;
  return false;
}

bool engine_addr_blocked(const char *addr, const char **why) {
  unsigned char b[16];
  const char *dummy;
  if (!why)
    why = &dummy;
  if (inet_pton(AF_INET, addr, b) == 1)
    return v4_blocked(b, why);
  if (inet_pton(AF_INET6, addr, b) == 1)
    return v6_blocked(b, why);
  *why = "not an IP address";
  return true;
}

static int refuse(char *err, size_t errlen, const char *url, const char *what) {
  snprintf(err, errlen, "endpoint \"%.200s\": %s", url, what);
  return GS_EINVAL;
}

/* Scheme, host and port as libcurl itself reads the URL. */
static int split_url(const char *url, struct engine_endpoint *ep, char *err, size_t errlen) {
  CURLU *u = curl_url();
  if (!u)
    return GS_ENOMEM;
  char *scheme = NULL, *host = NULL, *port = NULL, *user = NULL;
  int rc = 0;
  if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
      curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK)
    rc = refuse(err, errlen, url, "not a URL (expected http://HOST:PORT/PATH)");
  else if (strcasecmp(scheme, "http") != 0 && strcasecmp(scheme, "https") != 0)
    rc = refuse(err, errlen, url, "only http:// and https:// URLs are allowed");
  else if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK)
    rc = refuse(err, errlen, url, "no host (expected http://HOST:PORT/PATH)");
  else if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK)
    rc = refuse(err, errlen, url, "user info (user@host) is not allowed");
  if (!rc) {
    size_t n = strlen(host);
    const char *h = host;
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') { /* curl keeps IPv6 brackets */
      h = host + 1;
      n -= 2;
    }
    if (n == 0 || n >= sizeof ep->host)
      rc = refuse(err, errlen, url, "no host, or a host name too long");
    else {
      memcpy(ep->host, h, n);
      ep->host[n] = '\0';
    }
    if (!rc && curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK)
      ep->port = (int)strtol(port, NULL, 10);
  }
  curl_free(scheme);
  curl_free(host);
  curl_free(port);
  curl_free(user);
  curl_url_cleanup(u);
  return rc;
}

/* Every address of res must pass; the first is kept in ep->addr. */
static int check_addrs(const char *url, struct engine_endpoint *ep, const struct addrinfo *res,
                       char *err, size_t errlen) {
  int rc = 0;
  for (const struct addrinfo *ai = res; ai && !rc; ai = ai->ai_next) {
    char a[64] = "";
    if (ai->ai_family == AF_INET)
      inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)ai->ai_addr)->sin_addr, a, sizeof a);
    else if (ai->ai_family == AF_INET6)
      inet_ntop(AF_INET6, &((struct sockaddr_in6 *)(void *)ai->ai_addr)->sin6_addr, a, sizeof a);
    else
      continue;
    const char *why = "";
    if (engine_addr_blocked(a, &why)) {
      snprintf(err, errlen, "endpoint \"%.200s\": %.100s resolves to %s, %s, which is never read",
               url, ep->host, a, why);
      rc = GS_EINVAL;
    } else if (!ep->addr[0])
      snprintf(ep->addr, sizeof ep->addr, "%s", a);
  }
  if (!rc && !ep->addr[0])
    rc = refuse(err, errlen, url, "the host has no IPv4 or IPv6 address");
  return rc;
}

/* Everything decidable from the URL itself, without a name lookup: scheme, user info, the
 * metadata names and this machine's names, and an IP literal's address. *literal is set when the
 * host is an IP literal (any form getaddrinfo reads as one, e.g. "2130706433"), whose checked
 * address is then in ep->addr. */
static int check_url(const char *url, struct engine_endpoint *ep, bool *literal, char *err,
                     size_t errlen) {
  memset(ep, 0, sizeof *ep);
  *literal = false;
  if (!url || !*url)
    return refuse(err, errlen, "", "empty URL");
  int rc = split_url(url, ep, err, errlen);
  if (rc)
    return rc;
  char lower[sizeof ep->host];
  size_t n = strlen(ep->host);
  for (size_t i = 0; i <= n; i++)
    lower[i] = (char)((ep->host[i] >= 'A' && ep->host[i] <= 'Z') ? ep->host[i] + 32 : ep->host[i]);
  if (n && lower[n - 1] == '.') /* "metadata.google.internal." is the same name */
    lower[--n] = '\0';
  for (size_t i = 0; i < sizeof metadata_names / sizeof metadata_names[0]; i++)
    if (strcmp(lower, metadata_names[i]) == 0)
      return refuse(err, errlen, url, "the host is a metadata service or this machine");
  if (n > 10 && strcmp(lower + n - 10, ".localhost") == 0)
    return refuse(err, errlen, url, "the host is this machine (.localhost)");
  /* AI_NUMERICHOST: an IP literal is read, a name is not looked up (no network I/O here). */
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST;
  if (getaddrinfo(ep->host, NULL, &hints, &res) != 0)
    return 0; /* a name: engine_endpoint_resolve looks it up, off the gRPC handlers */
  *literal = true;
  rc = check_addrs(url, ep, res, err, errlen);
  freeaddrinfo(res);
  return rc;
}

int engine_endpoint_check(const char *url, char *err, size_t errlen) {
  struct engine_endpoint ep;
  bool literal;
  return check_url(url, &ep, &literal, err, errlen);
}

int engine_endpoint_resolve(const char *url, struct engine_endpoint *ep, char *err, size_t errlen) {
  bool literal;
  int rc = check_url(url, ep, &literal, err, errlen);
  if (rc || literal)
    return rc;
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int g = getaddrinfo(ep->host, NULL, &hints, &res);
  if (g != 0) {
    snprintf(err, errlen, "endpoint \"%.200s\": cannot resolve %.100s: %s", url, ep->host,
             gai_strerror(g));
    return GS_EUNAVAIL;
  }
  rc = check_addrs(url, ep, res, err, errlen);
  freeaddrinfo(res);
  return rc;
}
