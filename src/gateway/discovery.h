/* Finding agents: a static address list, or every A/AAAA record of a headless Service, re-resolved.
 */
#ifndef GS_DISCOVERY_H
#define GS_DISCOVERY_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DISCOVERY_MAX_TARGETS 4096

/* Splits "a:1,b:2" into owned strings. Each must be HOST:PORT. Returns 0, or GS_EINVAL with err
 * naming the bad entry. Free with discovery_targets_free. */
int discovery_parse_static(const char *list, char ***out, size_t *n, char *err, size_t errlen);
/* Resolves NAME:PORT to every address record as "IP:PORT" ("[v6]:PORT"), sorted and unique.
 * Returns 0 (n may be 0 when the name has no records yet), or GS_EINVAL / GS_EUNAVAIL with err. */
int discovery_resolve(const char *name_port, char ***out, size_t *n, char *err, size_t errlen);
void discovery_targets_free(char **t, size_t n);

/* A thread that re-resolves name_port every refresh_ms and hands the list to on_targets (also
 * once at start). Failures are logged (rate-limited) and keep the previous list. */
struct discovery {
  char *name_port;
  int64_t refresh_ms;
  void (*on_targets)(void *ud, const char *const *targets, size_t n);
  void *ud;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool stop, started;
  size_t last_n;
};

int discovery_start(struct discovery *d, const char *name_port, int64_t refresh_ms,
                    void (*on_targets)(void *ud, const char *const *targets, size_t n), void *ud);
void discovery_stop(struct discovery *d);

#endif
