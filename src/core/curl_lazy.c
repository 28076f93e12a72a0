/* libcurl loaded on first use: the libcurl functions the tree calls, each forwarding to
 * libcurl.so.4 opened with dlopen the first time any of them runs.
 *
 * Why: linking libcurl maps it and about 30 libraries it needs (GnuTLS or OpenSSL, LDAP,
 * Kerberos, SSH, IDN...) into every gpuscale process at start, some 3.5 MiB of RSS, while the
 * agent uses HTTP clients only in a pod (the Kubernetes API) and `rightsize` only for its
 * queries. These definitions keep libcurl's own names, so that the callers (rightsize/prom.c,
 * rightsize/kube.c, agent/engines.c ...) include <curl/curl.h> and call libcurl as usual; the
 * binary does not link libcurl (CMakeLists.txt). A function used for the first time must be
 * added here, or the link fails with an undefined reference to it.
 *
 * If libcurl.so.4 cannot be loaded, each call fails as libcurl does when it cannot start
 * (CURLE_FAILED_INIT, NULL), and the reason is logged once. */
#define CURL_DISABLE_TYPECHECK /* the names below must not be macros */
#include <curl/curl.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include "core/log.h"

#define CURL_SONAME "libcurl.so.4"

/* The functions resolved from the library, in this order (the index is the enum). */
// clang-format off
#define CURL_FUNCS(X) \
  X(global_init) \
  X(global_cleanup) \
  X(version) \
  X(free) \
  X(easy_init) \
  X(easy_cleanup) \
  X(easy_reset) \
  X(easy_duphandle) \
  X(easy_setopt) \
  X(easy_getinfo) \
  X(easy_perform) \
  X(easy_strerror) \
  X(easy_escape) \
  X(easy_unescape) \
  X(slist_append) \
  X(slist_free_all) \
  X(multi_init) \
  X(multi_cleanup) \
  X(multi_add_handle) \
  X(multi_remove_handle) \
  X(multi_perform) \
  X(multi_poll) \
  X(multi_wait) \
  X(multi_wakeup) \
  X(multi_info_read) \
  X(multi_setopt) \
  X(multi_timeout) \
  X(multi_strerror) \
  X(url) \
  X(url_cleanup) \
  X(url_dup) \
  X(url_get) \
  X(url_set) \
  X(url_strerror)
// clang-format on

enum {
#define CURL_ENUM(n) F_##n,
  CURL_FUNCS(CURL_ENUM)
#undef CURL_ENUM
      F__COUNT
};

static const char *const fn_names[F__COUNT] = {
#define CURL_NAME(n) "curl_" #n,
    CURL_FUNCS(CURL_NAME)
#undef CURL_NAME
};

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static void *fns[F__COUNT];
static char load_error[320];

static void load(void) {
  void *lib = dlopen(CURL_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *why = dlerror();
    snprintf(load_error, sizeof load_error, "cannot load %s: %s", CURL_SONAME,
             why ? why : "unknown error");
    LOG_ERROR("curl",
              "%s; HTTP clients (Kubernetes API, Prometheus, engine metrics) cannot work "
              "(install the libcurl4 package)",
              load_error);
    return;
  }
  /* dlsym on the handle: libcurl's own definitions, never these forwarders. Kept loaded for the
   * life of the process, as a linked library would be. */
  for (int i = 0; i < F__COUNT; i++)
    fns[i] = dlsym(lib, fn_names[i]);
}

static void *fn(int i) {
  pthread_once(&load_once, load);
  return fns[i];
}

/* The pointer to the real function, typed as the prototype in <curl/curl.h>. */
#define REAL(n) ((__typeof__(&curl_##n))fn(F_##n))

CURLcode curl_global_init(long flags) {
  return REAL(global_init) ? REAL(global_init)(flags) : CURLE_FAILED_INIT;
}

void curl_global_cleanup(void) {
  if (REAL(global_cleanup))
    REAL(global_cleanup)();
}

char *curl_version(void) {
  return REAL(version) ? REAL(version)() : load_error;
}

void curl_free(void *p) {
  if (p && REAL(free))
    REAL(free)(p);
}

CURL *curl_easy_init(void) {
  return REAL(easy_init) ? REAL(easy_init)() : NULL;
}

void curl_easy_cleanup(CURL *h) {
  if (REAL(easy_cleanup))
    REAL(easy_cleanup)(h);
}

void curl_easy_reset(CURL *h) {
  if (REAL(easy_reset))
    REAL(easy_reset)(h);
}

CURL *curl_easy_duphandle(CURL *h) {
  return REAL(easy_duphandle) ? REAL(easy_duphandle)(h) : NULL;
}

/* An option's one argument, read as the type its number says (curl.h's CURLOPTTYPE_ ranges):
 * long, pointer (objects, strings, lists, callback data, blobs), function pointer or curl_off_t. */
#define FORWARD_OPTION(call, opt, ap)                                                              \
  ((opt) < CURLOPTTYPE_OBJECTPOINT     ? call(va_arg(ap, long))                                    \
   : (opt) < CURLOPTTYPE_FUNCTIONPOINT ? call(va_arg(ap, void *))                                  \
   : (opt) < CURLOPTTYPE_OFF_T         ? call(va_arg(ap, void (*)(void)))                          \
   : (opt) < CURLOPTTYPE_BLOB          ? call(va_arg(ap, curl_off_t))                              \
                                       : call(va_arg(ap, void *)))

CURLcode curl_easy_setopt(CURL *h, CURLoption opt, ...) {
  __typeof__(&curl_easy_setopt) f = REAL(easy_setopt);
  if (!f)
    return CURLE_FAILED_INIT;
  va_list ap;
  va_start(ap, opt);
#define CALL(arg) f(h, opt, arg)
  CURLcode rc = FORWARD_OPTION(CALL, (long)opt, ap);
#undef CALL
  va_end(ap);
  return rc;
}

CURLMcode curl_multi_setopt(CURLM *m, CURLMoption opt, ...) {
  __typeof__(&curl_multi_setopt) f = REAL(multi_setopt);
  if (!f)
    return CURLM_INTERNAL_ERROR;
  va_list ap;
  va_start(ap, opt);
#define CALL(arg) f(m, opt, arg)
  CURLMcode rc = FORWARD_OPTION(CALL, (long)opt, ap);
#undef CALL
  va_end(ap);
  return rc;
}

CURLcode curl_easy_getinfo(CURL *h, CURLINFO info, ...) {
  __typeof__(&curl_easy_getinfo) f = REAL(easy_getinfo);
  if (!f)
    return CURLE_FAILED_INIT;
  va_list ap;
  va_start(ap, info);
  CURLcode rc = f(h, info, va_arg(ap, void *)); /* every CURLINFO takes one pointer */
  va_end(ap);
  return rc;
}

CURLcode curl_easy_perform(CURL *h) {
  return REAL(easy_perform) ? REAL(easy_perform)(h) : CURLE_FAILED_INIT;
}

const char *curl_easy_strerror(CURLcode c) {
  return REAL(easy_strerror) ? REAL(easy_strerror)(c) : load_error;
}

char *curl_easy_escape(CURL *h, const char *s, int len) {
  return REAL(easy_escape) ? REAL(easy_escape)(h, s, len) : NULL;
}

char *curl_easy_unescape(CURL *h, const char *s, int len, int *outlen) {
  return REAL(easy_unescape) ? REAL(easy_unescape)(h, s, len, outlen) : NULL;
}

struct curl_slist *curl_slist_append(struct curl_slist *l, const char *s) {
  return REAL(slist_append) ? REAL(slist_append)(l, s) : NULL;
}

void curl_slist_free_all(struct curl_slist *l) {
  if (l && REAL(slist_free_all))
    REAL(slist_free_all)(l);
}

CURLM *curl_multi_init(void) {
  return REAL(multi_init) ? REAL(multi_init)() : NULL;
}

CURLMcode curl_multi_cleanup(CURLM *m) {
  return REAL(multi_cleanup) ? REAL(multi_cleanup)(m) : CURLM_INTERNAL_ERROR;
}

CURLMcode curl_multi_add_handle(CURLM *m, CURL *h) {
  return REAL(multi_add_handle) ? REAL(multi_add_handle)(m, h) : CURLM_INTERNAL_ERROR;
}

CURLMcode curl_multi_remove_handle(CURLM *m, CURL *h) {
  return REAL(multi_remove_handle) ? REAL(multi_remove_handle)(m, h) : CURLM_INTERNAL_ERROR;
}

CURLMcode curl_multi_perform(CURLM *m, int *running) {
  return REAL(multi_perform) ? REAL(multi_perform)(m, running) : CURLM_INTERNAL_ERROR;
}

CURLMcode curl_multi_poll(CURLM *m, struct curl_waitfd extra[], unsigned n, int ms, int *ret) {
  return REAL(multi_poll) ? REAL(multi_poll)(m, extra, n, ms, ret) : CURLM_INTERNAL_ERROR;
}

CURLMcode curl_multi_wait(CURLM *m, struct curl_waitfd extra[], unsigned n, int ms, int *ret) {
  return REAL(multi_wait) ? REAL(multi_wait)(m, extra, n, ms, ret) : CURLM_INTERNAL_ERROR;
}

CURLMcode curl_multi_wakeup(CURLM *m) {
  return REAL(multi_wakeup) ? REAL(multi_wakeup)(m) : CURLM_INTERNAL_ERROR;
}

CURLMsg *curl_multi_info_read(CURLM *m, int *left) {
  return REAL(multi_info_read) ? REAL(multi_info_read)(m, left) : NULL;
}

CURLMcode curl_multi_timeout(CURLM *m, long *ms) {
  return REAL(multi_timeout) ? REAL(multi_timeout)(m, ms) : CURLM_INTERNAL_ERROR;
}

const char *curl_multi_strerror(CURLMcode c) {
  return REAL(multi_strerror) ? REAL(multi_strerror)(c) : load_error;
}

CURLU *curl_url(void) {
  return REAL(url) ? REAL(url)() : NULL;
}

void curl_url_cleanup(CURLU *u) {
  if (REAL(url_cleanup))
    REAL(url_cleanup)(u);
}

CURLU *curl_url_dup(CURLU *u) {
  return REAL(url_dup) ? REAL(url_dup)(u) : NULL;
}

CURLUcode curl_url_get(CURLU *u, CURLUPart what, char **part, unsigned int flags) {
  return REAL(url_get) ? REAL(url_get)(u, what, part, flags) : CURLUE_OUT_OF_MEMORY;
}

CURLUcode curl_url_set(CURLU *u, CURLUPart what, const char *part, unsigned int flags) {
  return REAL(url_set) ? REAL(url_set)(u, what, part, flags) : CURLUE_OUT_OF_MEMORY;
}

const char *curl_url_strerror(CURLUcode c) {
  return REAL(url_strerror) ? REAL(url_strerror)(c) : load_error;
}
