/* The URL safety rule of --allow-engine-endpoints (engine_endpoint_check in agent/engines.h), with
 * the checked address kept, so that the request goes where the check looked and nowhere else. */
#ifndef GS_AGENT_ENGINE_ENDPOINT_H
#define GS_AGENT_ENGINE_ENDPOINT_H

#include <stdbool.h>
#include <stddef.h>

struct engine_endpoint {
  char host[256]; /* as in the URL, without brackets */
  int port;       /* the URL's, or 80 / 443 */
  char addr[64];  /* the first resolved address, all of which passed */
};

/* engine_endpoint_check, filling *ep on success. */
int engine_endpoint_resolve(const char *url, struct engine_endpoint *ep, char *err, size_t errlen);
/* True when the IP literal addr is loopback, unspecified, link-local or a metadata address. */
bool engine_addr_blocked(const char *addr, const char **why);

#endif
