/* Allocation failure injection for unit tests, in the style of curl's torture tests: count the
 * allocations one call makes, then run it again failing allocation N, for every N, until a run
 * makes no allocation past N (so it succeeded with nothing injected).
 *
 * Include this header in exactly one file of a test executable. It defines malloc, calloc,
 * realloc, reallocarray, free, strdup and strndup for the whole process: the executable's
 * definitions come before libc's and ASan's in symbol lookup, so json-c, libyaml and protobuf-c
 * allocate through them too. Each forwards to the next definition (dlsym(RTLD_NEXT): ASan's under
 * ASan, libc's otherwise, valgrind's replacement under valgrind), so the sanitizers and valgrind
 * still see every block.
 *
 * What is injected where (docs/development.md, "Faults"):
 * - our own code, libyaml and protobuf-c: every allocation can fail (both handle it);
 * - json-c 0.16 is not safe against its own allocation failures (json_object_object_add_ex
 *   reads a failed strdup), so allocations made from inside libjson-c are counted out
 *   (af_exclude_dso), and json_tokener_new_ex fails as one unit (test_alloc_fail.c);
 * - glibc's regcomp double-frees when one of its reallocs fails, so allocations inside it are
 *   counted out (af_lib_enter) and the whole call fails with REG_ESPACE instead.
 * af_loop also checks that every block allocated during a failed run is freed by its end.
 * Include it after cmocka.h (the loop fails the test through cmocka). */
#ifndef GS_ALLOC_FAIL_H
#define GS_ALLOC_FAIL_H

#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The hooks run before ASan has set itself up (its start-up dlsym allocates): no instrumentation.
 */
#if defined(__clang__)
#define AF_NOSAN __attribute__((no_sanitize("address", "undefined")))
#else
#define AF_NOSAN __attribute__((no_sanitize_address, no_sanitize_undefined))
#endif

struct af_state {
  long calls;           /* allocations counted since af_arm */
  long fail_at;         /* which one fails; -1: none */
  bool fired;           /* the failure was injected */
  const void *fired_by; /* the caller of the allocation that failed (NULL: a library unit) */
  long live;            /* blocks allocated and not yet freed, over the whole process */
  int lib; /* > 0: inside a library call that fails as one unit (allocations not counted) */
  void *excluded[4]; /* load addresses of libraries whose own allocations are not counted */
  size_t n_excluded;
  void *leaky;      /* load address of a library with a known leak on its own failures */
  long leaks_freed; /* blocks of that library freed by af_loop after a failed run */
};
static struct af_state af = {.fail_at = -1};

/* The blocks a run allocated and has not freed, with their callers, so that a leak names where
 * the block came from (the first AF_TRACK_MAX of a run). */
#define AF_TRACK_MAX 4096
static struct {
  void *p;
  const void *caller;
} af_track[AF_TRACK_MAX];
static size_t af_ntrack;
static bool af_tracking;

AF_NOSAN static void af_track_add(void *p, const void *caller) {
  if (af_tracking && p && af_ntrack < AF_TRACK_MAX) {
    af_track[af_ntrack].p = p;
    af_track[af_ntrack++].caller = caller;
  }
}

AF_NOSAN static void af_track_del(void *p) {
  for (size_t i = 0; af_tracking && i < af_ntrack; i++)
    if (af_track[i].p == p) {
      af_track[i] = af_track[--af_ntrack];
      return;
    }
}

static void *(*af_real_malloc)(size_t);
static void *(*af_real_calloc)(size_t, size_t);
static void *(*af_real_realloc)(void *, size_t);
static void (*af_real_free)(void *);
static bool af_resolving;
/* dlsym may allocate before the real functions are known: serve it from here, never freed. */
static _Alignas(16) char af_boot[8192];
static size_t af_boot_used;

AF_NOSAN static void af_resolve(void) {
  if (af_real_free || af_resolving)
    return;
  af_resolving = true;
  af_real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
  af_real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
  af_real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
  af_real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
  af_resolving = false;
}

AF_NOSAN static void *af_boot_alloc(size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (af_boot_used + n > sizeof af_boot)
    return NULL;
  void *p = af_boot + af_boot_used;
  af_boot_used += n;
  return p; /* static storage: already zero */
}

AF_NOSAN static bool af_is_boot(const void *p) {
  return (const char *)p >= af_boot && (const char *)p < af_boot + sizeof af_boot;
}

/* True when caller lies in a library registered with af_exclude_dso. */
AF_NOSAN static bool af_excluded_caller(const void *caller) {
  if (af.n_excluded == 0 || !caller)
    return false;
  Dl_info di;
  if (!dladdr(caller, &di))
    return false;
  for (size_t i = 0; i < af.n_excluded; i++)
    if (di.dli_fbase == af.excluded[i])
      return true;
  return false;
}

/* Counts one allocation made from caller; true when it is the one to fail. */
AF_NOSAN static bool af_fail_now(const void *caller) {
  if (af.fail_at < 0 || af.lib > 0 || af_excluded_caller(caller))
    return false;
  if (af.calls++ != af.fail_at)
    return false;
  af.fired = true;
  af.fired_by = caller;
  return true;
}

/* A library call that fails as one unit: returns true when it is to fail (counted as one
 * allocation); otherwise the caller brackets the real call with af_lib_enter/af_lib_leave. */
static bool af_lib_fail(void) {
  return af_fail_now(NULL);
}
static void af_lib_enter(void) {
  af.lib++;
}
static void af_lib_leave(void) {
  af.lib--;
}

/* Allocations made from inside the library that holds sym are not counted (never fail). */
static void af_exclude_dso(const void *sym) {
  Dl_info di;
  if (sym && dladdr(sym, &di) && af.n_excluded < sizeof af.excluded / sizeof af.excluded[0])
    af.excluded[af.n_excluded++] = di.dli_fbase;
}

/* A library with a known leak after its own allocation fails (libyaml 0.2.5: the items stack of a
 * sequence or mapping when adding the node fails). After such a run, af_loop frees the blocks
 * that library allocated and left, counts them, and does not fail the test for them. */
static void af_leaky_dso(const void *sym) {
  Dl_info di;
  if (sym && dladdr(sym, &di))
    af.leaky = di.dli_fbase;
}

static bool af_in_dso(const void *caller, const void *base) {
  Dl_info di;
  return base && caller && dladdr(caller, &di) && di.dli_fbase == base;
}

AF_NOSAN static void *af_malloc_from(size_t n, const void *caller) {
  af_resolve();
  if (!af_real_malloc)
    return af_boot_alloc(n);
  if (af_fail_now(caller))
    return NULL;
  void *p = af_real_malloc(n);
  if (p)
    af.live++;
  af_track_add(p, caller);
  return p;
}

AF_NOSAN void *malloc(size_t n) {
  return af_malloc_from(n, __builtin_return_address(0));
}

AF_NOSAN void *calloc(size_t k, size_t n) {
  af_resolve();
  if (!af_real_calloc)
    return (n && k > SIZE_MAX / n) ? NULL : af_boot_alloc(k * n);
  if (af_fail_now(__builtin_return_address(0)))
    return NULL;
  void *p = af_real_calloc(k, n);
  if (p)
    af.live++;
  af_track_add(p, __builtin_return_address(0));
  return p;
}

AF_NOSAN void *realloc(void *q, size_t n) {
  af_resolve();
  if (af_is_boot(q)) { /* never happens in practice: copy out of the boot area */
    void *p = af_malloc_from(n, __builtin_return_address(0));
    size_t avail = (size_t)(af_boot + sizeof af_boot - (char *)q);
    if (p)
      memcpy(p, q, n < avail ? n : avail);
    return p;
  }
  if (af_fail_now(__builtin_return_address(0)))
    return NULL;
  void *p = af_real_realloc(q, n);
  if (p && !q)
    af.live++;
  else if (!p && q && n == 0)
    af.live--;
  if (p && q != p) {
    af_track_del(q);
    af_track_add(p, __builtin_return_address(0));
  }
  return p;
}

AF_NOSAN void *reallocarray(void *q, size_t k, size_t n) {
  if (n && k > SIZE_MAX / n)
    return NULL;
  return realloc(q, k * n);
}

AF_NOSAN void free(void *p) {
  if (!p || af_is_boot(p))
    return;
  af_resolve();
  af.live--;
  af_track_del(p);
  af_real_free(p);
}

AF_NOSAN char *strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = af_malloc_from(n, __builtin_return_address(0));
  if (p)
    memcpy(p, s, n);
  return p;
}

AF_NOSAN char *strndup(const char *s, size_t max) {
  size_t n = strnlen(s, max);
  char *p = af_malloc_from(n + 1, __builtin_return_address(0));
  if (p) {
    memcpy(p, s, n);
    p[n] = '\0';
  }
  return p;
}

/* Arms the counter: allocation fail_at (0-based) fails; -1 only counts. */
static void af_arm(long fail_at) {
  af.calls = 0;
  af.fired = false;
  af.fired_by = NULL;
  af.fail_at = fail_at;
}

/* Where the allocation made from caller was, for messages: "function+offset (object)". */
static const char *af_where_of(const void *caller, char *out, size_t len);
static const char *af_where(char *out, size_t len) {
  return af_where_of(af.fired_by, out, len);
}
static const char *af_where_of(const void *caller, char *out, size_t len) {
  Dl_info di;
  if (!caller)
    snprintf(out, len, "a library call failing as one unit");
  else if (dladdr(caller, &di) && di.dli_fname)
    snprintf(out, len, "%s+%#lx (%s)", di.dli_sname ? di.dli_sname : "?",
             (unsigned long)((const char *)caller -
                             (const char *)(di.dli_saddr ? di.dli_saddr : di.dli_fbase)),
             di.dli_fname);
  else
    snprintf(out, len, "%p", caller);
  return out;
}

/* Disarms; returns how many allocations were counted. */
static long af_disarm(void) {
  af.fail_at = -1;
  return af.calls;
}

/* One run of the call under test: makes the call, checks what it returned (on success its
 * output, on failure that nothing is owned), frees everything, and returns the call's code. why
 * receives the call's error message. */
typedef int (*af_run_fn)(const void *arg, char *why, size_t whylen);

/* The loop. Fails the test (through the caller's cmocka) on: a run with nothing injected that
 * fails; an injected failure that still returns 0 or a code outside allowed[0..n_allowed); a
 * failed run that leaves a block allocated. Returns the number of allocations, all failed once. */
#define af_loop(name, run, arg, allowed, n_allowed)                                                \
  af_loop_impl(name, run, arg, allowed, n_allowed, __FILE__, __LINE__)

static long af_loop_impl(const char *name, af_run_fn run, const void *arg, const int *allowed,
                         size_t n_allowed, const char *file, int line) {
  char why[512] = "";
  /* a first run warms what libraries set up once (locale, stdio) */
  af_arm(-1);
  int rc = run(arg, why, sizeof why);
  af_disarm();
  if (rc != 0) {
    print_error("%s: fails with nothing injected: %d (%s)\n", name, rc, why);
    _fail(file, line);
  }
  long n;
  for (n = 0;; n++) {
    long live0 = af.live;
    why[0] = '\0';
    af_ntrack = 0;
    af_tracking = true;
    af_arm(n);
    rc = run(arg, why, sizeof why);
    bool fired = af.fired;
    af_disarm();
    af_tracking = false;
    if (!fired) {
      if (rc != 0) {
        print_error("%s: fails with nothing injected: %d (%s)\n", name, rc, why);
        _fail(file, line);
      }
      break;
    }
    /* glibc's stdio does without its buffer when that allocation fails (unbuffered I/O) */
    Dl_info di;
    bool ok = rc == 0 && af.fired_by && dladdr(af.fired_by, &di) && di.dli_sname &&
              strcmp(di.dli_sname, "_IO_file_doallocate") == 0;
    for (size_t i = 0; i < n_allowed; i++)
      ok = ok || rc == allowed[i];
    char where[512];
    if (!ok) {
      print_error("%s: allocation %ld failed (in %s), the call returned %d (%s)\n", name, n,
                  af_where(where, sizeof where), rc, why);
      _fail(file, line);
    }
    if (af.live != live0 && af_in_dso(af.fired_by, af.leaky)) {
      size_t keep = 0;
      af_tracking = false;
      for (size_t i = 0; i < af_ntrack; i++)
        if (af_in_dso(af_track[i].caller, af.leaky)) {
          free(af_track[i].p);
          af.leaks_freed++;
        } else {
          af_track[keep++] = af_track[i];
        }
      af_ntrack = keep;
    }
    if (af.live != live0) {
      print_error("%s: allocation %ld failed (in %s), %ld block(s) left allocated\n", name, n,
                  af_where(where, sizeof where), af.live - live0);
      for (size_t i = 0; i < af_ntrack; i++)
        print_error("  left: %p from %s\n", af_track[i].p,
                    af_where_of(af_track[i].caller, where, sizeof where));
      _fail(file, line);
    }
  }
  if (n == 0) {
    print_error("%s: the call allocates nothing: the loop tests nothing\n", name);
    _fail(file, line);
  }
  print_message("%s: %ld allocations, each failed once\n", name, n);
  if (af.leaks_freed)
    print_message("%s: %ld block(s) leaked by a library on its own failure, freed here\n", name,
                  af.leaks_freed);
  af.leaks_freed = 0;
  return n;
}

#endif
