/* A workload's owner guessed from its pod name, for when the Kubernetes API is not asked. */
#include "rightsize/owner_guess.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static bool rs_alnum_rand(char c) {
  /* Kubernetes' rand.String alphabet: no vowels, no 0/1/3 */
  return strchr("bcdfghjklmnpqrstvwxz2456789", c) != NULL && c != '\0';
}

static bool all_rand(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!rs_alnum_rand(s[i]))
      return false;
  return true;
}

void rs_owner_from_pod(const char *pod, char *out, size_t outlen, enum rs_owner_source *src) {
  size_t n = strlen(pod);
  *src = RS_OWNER_POD;
  size_t cut = n;
  const char *d1 = strrchr(pod, '-');
  if (d1 && d1 != pod) {
    size_t tail = n - (size_t)(d1 - pod) - 1;
    size_t head = (size_t)(d1 - pod);
    bool digits = tail > 0;
    for (size_t i = 0; i < tail; i++)
      digits = digits && d1[1 + i] >= '0' && d1[1 + i] <= '9';
    if (tail == 5 && all_rand(d1 + 1, 5)) {
      cut = head; /* DaemonSet, Job or ReplicaSet pod suffix */
      /* a ReplicaSet hash before it: "-<6..10 rand chars>" */
      const char *d2 = NULL;
      for (size_t i = head; i-- > 0;)
        if (pod[i] == '-') {
          d2 = pod + i;
          break;
        }
      if (d2 && d2 != pod) {
        size_t hl = head - (size_t)(d2 - pod) - 1;
        if (hl >= 6 && hl <= 10 && all_rand(d2 + 1, hl))
          cut = (size_t)(d2 - pod);
      }
    } else if (digits && tail <= 5) {
      cut = head; /* StatefulSet ordinal */
    }
  }
  if (cut != n)
    *src = RS_OWNER_HEURISTIC;
  snprintf(out, outlen, "%.*s", (int)cut, pod);
}
