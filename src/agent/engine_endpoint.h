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

/* engine_endpoint_check, then, for a host name, the lookup: every address it resolves to must
 * pass. Fills *ep on success. Blocks on DNS: call it off the gRPC handlers (the URL refresher of
 * engine_urls.h does). Returns 0, GS_EINVAL (the URL breaks the rule, err says how) or
 * GS_EUNAVAIL (the name does not resolve now, err says why). */
int engine_endpoint_resolve(const char *url, struct engine_endpoint *ep, char *err, size_t errlen);
/* True when the IP literal addr is loopback, unspecified, link-local or a metadata address. */
bool engine_addr_blocked(const char *addr, const char **why);

#endif
