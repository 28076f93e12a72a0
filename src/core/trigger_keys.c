/* Known trigger metadata keys, and "did you mean" for the others. */
#include "core/trigger_keys.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* Every key trigger_parse reads (core/trigger.c), then the keys KEDA's external scaler reads for
 * itself and passes on with the rest. Keep in step with trigger_parse and docs/profiles.md
 * (tests/unit/test_trigger_keys.c lists every documented key). */
static const char *const known[] = {
    "profile",
    "metricType",
    "targetValue",
    "activationThreshold",
    "aggregation",
    "gpuIndex",
    "window",
    "metricName",
    "targetGpuUtilization",
    "targetMemoryUtilization",
    "pollIntervalSeconds",
    "vllmEndpoint",
    "tritonEndpoint",
    "scope",
    "namespace",
    "pods",
    "nodes",
    "gpuModel",
    "node",
    "value",
    "allowPartial",
    "minCoverage",
    "model",
    "modelVersion",
    "maxNumSeqs",
    "quantile",
    "minPrefillTokensPerSecond",
    /* KEDA's own (pkg/scalers/external_scaler.go) */
    "scalerAddress",
    "tlsCertFile",
    "unsafeSsl",
    "enableTLS",
    "caCert",
    "tlsClientCert",
    "tlsClientKey",
};
#define NKNOWN (sizeof known / sizeof known[0])
#define KEY_CMP_MAX 64 /* longer keys are never near a known one (the longest is 23) */

bool trigger_key_known(const char *key) {
  for (size_t i = 0; i < NKNOWN; i++)
    if (!strcmp(known[i], key))
      return true;
  return false;
}

/* Case-insensitive optimal string alignment distance (Levenshtein plus adjacent swaps). */
static size_t distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  size_t d[KEY_CMP_MAX + 1][KEY_CMP_MAX + 1];
  for (size_t i = 0; i <= la; i++)
    d[i][0] = i;
  for (size_t j = 0; j <= lb; j++)
    d[0][j] = j;
  for (size_t i = 1; i <= la; i++)
    for (size_t j = 1; j <= lb; j++) {
      int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
      size_t best = d[i - 1][j - 1] + (ca != cb);
      if (d[i - 1][j] + 1 < best)
        best = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < best)
        best = d[i][j - 1] + 1;
      if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
          tolower((unsigned char)a[i - 2]) == cb && d[i - 2][j - 2] + 1 < best)
        best = d[i - 2][j - 2] + 1;
      d[i][j] = best;
    }
  return d[la][lb];
}

const char *trigger_key_suggest(const char *key) {
  size_t len = strlen(key);
  if (len == 0 || len > KEY_CMP_MAX)
    return NULL;
  size_t limit = len / 3 > 2 ? len / 3 : 2;
  const char *best = NULL;
  size_t best_d = limit + 1;
  for (size_t i = 0; i < NKNOWN; i++) {
    if (strlen(known[i]) > KEY_CMP_MAX)
      continue;
    size_t dd = distance(key, known[i]);
    if (dd < best_d) {
      best_d = dd;
      best = known[i];
    }
  }
  /* A short key two edits from a short known one is a guess, not a typo ("pod" and "node"). */
  if (best && best_d == 2 && len < 5)
    return NULL;
  return best;
}

size_t trigger_unknown_keys(const struct kv *md, size_t n, char *buf, size_t len) {
  size_t count = 0, off = 0;
  if (len)
    buf[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    const char *k = md[i].key ? md[i].key : "";
    if (trigger_key_known(k))
      continue;
    const char *s = trigger_key_suggest(k);
    int w;
    if (s)
      w = snprintf(buf + off, len > off ? len - off : 0, "%s%s (did you mean %s?)",
                   count ? ", " : "", k, s);
    else
      w = snprintf(buf + off, len > off ? len - off : 0, "%s%s", count ? ", " : "", k);
    if (w > 0)
      off = off + (size_t)w < len ? off + (size_t)w : (len ? len - 1 : 0);
    count++;
  }
  return count;
}
