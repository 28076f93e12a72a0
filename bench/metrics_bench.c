/* gs_metrics_bench: the /metrics figures of `make bench` (bench/metrics.sh runs it).
 *
 *   gs_metrics_bench render NGPUS [SECONDS]         render time of one scrape's body (mock GPUs,
 *                                                   the agent's real render path), plain and gzip
 *   gs_metrics_bench serve-static PLAIN GZ          serve two files' bytes at /metrics with the
 *                                                   agent's own HTTP server (the baseline: same
 *                                                   server, no rendering); prints "port N", runs
 *                                                   until SIGTERM/SIGINT
 *   gs_metrics_bench scrape URL SECONDS [gzip]      sequential scrapes on one kept-alive libcurl
 *                                                   connection, as Prometheus scrapes one target
 *   gs_metrics_bench concurrent NGPUS SCRAPERS SECONDS  the agent's /metrics route on the mock,
 * with SCRAPERS clients scraping at once (gzip), each round without and then with scrape
 * coalescing: scrape latency median and p99
 *
 * Every figure is one line "key value" on stdout, for bench/metrics.sh to put in the table.
 * Bounded by time and by count; loopback only by convention (metrics.sh). */
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/metrics.h"
#include "agent/scrapeflight.h"
#include "core/buf.h"
#include "core/err.h"
#include "http/server.h"

#define MAX_ITERS 1000000
#define MAX_SAMPLES 200000
#define MAX_FILE (16u * 1024 * 1024)

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* ---- render ------------------------------------------------------------------------------- */

/* Times metrics_mock_render for SECONDS (at most MAX_ITERS); prints median and p99 in us. */
static int bench_render(struct metrics_mock *mm, bool gz, double seconds, const char *key) {
  uint64_t *t = calloc(MAX_SAMPLES, sizeof *t);
  struct buf out;
  buf_init(&out, 64u * 1024 * 1024);
  if (!t)
    return 1;
  for (int i = 0; i < 20; i++) /* warm up: caches, buffer growth */
    if (metrics_mock_render(mm, gz, &out)) {
      fprintf(stderr, "render failed\n");
      free(t);
      buf_free(&out);
      return 1;
    }
  uint64_t end = now_ns() + (uint64_t)(seconds * 1e9);
  size_t n = 0;
  for (long it = 0; it < MAX_ITERS && now_ns() < end; it++) {
    uint64_t t0 = now_ns();
    if (metrics_mock_render(mm, gz, &out)) {
      fprintf(stderr, "render failed\n");
      free(t);
      buf_free(&out);
      return 1;
    }
    uint64_t dt = now_ns() - t0;
    if (n < MAX_SAMPLES)
      t[n++] = dt;
  }
  qsort(t, n, sizeof *t, cmp_u64);
  printf("%s_median_us %.1f\n", key, (double)t[n / 2] / 1e3);
  printf("%s_p99_us %.1f\n", key, (double)t[(n * 99) / 100] / 1e3);
  printf("%s_bytes %zu\n", key, out.len);
  printf("%s_n %zu\n", key, n);
  free(t);
  buf_free(&out);
  return 0;
}

static int cmd_render(int argc, char **argv) {
  if (argc < 1)
    return 2;
  long ngpus = strtol(argv[0], NULL, 10);
  double seconds = argc > 1 ? strtod(argv[1], NULL) : 1.0;
  if (ngpus < 1 || ngpus > 1024 || !(seconds > 0 && seconds <= 60))
    return 2;
  /* The full default set (every issue-11 field on H100s) and, in the same run, the 9 fields and 7
   * DCGM series /metrics had before: render time must not grow more than the bytes do. */
  struct metrics_mock *mm = metrics_mock_new_set((size_t)ngpus, true);
  struct metrics_mock *old = metrics_mock_new_set((size_t)ngpus, false);
  int rc = 1;
  if (!mm || !old)
    fprintf(stderr, "metrics_mock_new_set: out of memory\n");
  else
    rc = bench_render(mm, false, seconds, "render");
  if (!rc)
    rc = bench_render(mm, true, seconds, "render_gzip");
  if (!rc)
    rc = bench_render(old, false, seconds, "render_old");
  if (!rc)
    rc = bench_render(old, true, seconds, "render_old_gzip");
  metrics_mock_free(mm);
  metrics_mock_free(old);
  return rc;
}

/* ---- serve-static ------------------------------------------------------------------------- */

struct static_body {
  char *plain;
  size_t plain_len;
  char *gz;
  size_t gz_len;
};

/* The baseline route: copies a fixed body into the response, as the agent's route copies its
 * render; gzip bytes (already compressed) when the client accepts them. */
static void static_handle(void *ud, const struct http_request *req, struct http_response *resp) {
  const struct static_body *b = ud;
  resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
  if (req->accepts_gzip && b->gz_len) {
    resp->content_encoding = "gzip";
    if (buf_append(&resp->body, b->gz, b->gz_len))
      resp->status = 500;
  } else if (buf_append(&resp->body, b->plain, b->plain_len)) {
    resp->status = 500;
  }
}

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  char *p = malloc(MAX_FILE);
  size_t n = p ? fread(p, 1, MAX_FILE, f) : 0;
  fclose(f);
  if (!p)
    return NULL;
  *len = n;
  return p;
}

static volatile sig_atomic_t stop_flag;
static void on_signal(int sig) {
  (void)sig;
  stop_flag = 1;
}

static int cmd_serve_static(int argc, char **argv) {
  if (argc < 2)
    return 2;
  struct static_body b = {0};
  b.plain = read_file(argv[0], &b.plain_len);
  b.gz = read_file(argv[1], &b.gz_len);
  if (!b.plain || !b.gz) {
    fprintf(stderr, "cannot read %s or %s\n", argv[0], argv[1]);
    free(b.plain);
    free(b.gz);
    return 1;
  }
  struct sigaction sa = {0};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  struct http_route route = {"/metrics", static_handle, &b};
  struct http_server *srv = NULL;
  char err[256];
  if (http_server_start("127.0.0.1:0", &route, 1, &srv, err, sizeof err)) {
    fprintf(stderr, "http_server_start: %s\n", err);
    free(b.plain);
    free(b.gz);
    return 1;
  }
  printf("port %d\n", http_server_port(srv));
  fflush(stdout);
  while (!stop_flag)
    pause();
  http_server_stop(srv);
  free(b.plain);
  free(b.gz);
  return 0;
}

/* ---- scrape ------------------------------------------------------------------------------- */

static size_t sink(char *p, size_t size, size_t n, void *ud) {
  (void)p;
  *(size_t *)ud += size * n;
  return size * n;
}

static int cmd_scrape(int argc, char **argv) {
  if (argc < 2)
    return 2;
  const char *url = argv[0];
  double seconds = strtod(argv[1], NULL);
  bool gz = argc > 2 && strcmp(argv[2], "gzip") == 0;
  if (!(seconds > 0 && seconds <= 60))
    return 2;
  if (curl_global_init(CURL_GLOBAL_DEFAULT))
    return 1;
  CURL *c = curl_easy_init();
  if (!c)
    return 1;
  size_t bytes = 0;
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &bytes);
  /* Send the header only; no decoding, so the client's cost stays the same for both servers. */
  struct curl_slist *hdr = NULL;
  if (gz)
    hdr = curl_slist_append(hdr, "Accept-Encoding: gzip");
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
  int rc = 0;
  long n = 0, fails = 0;
  uint64_t t0 = now_ns(), end = t0 + (uint64_t)(seconds * 1e9);
  while (n < MAX_ITERS && now_ns() < end) {
    CURLcode cc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    if (cc != CURLE_OK || code != 200) {
      if (++fails > 10) {
        fprintf(stderr, "scrape %s: %s (HTTP %ld)\n", url, curl_easy_strerror(cc), code);
        rc = 1;
        break;
      }
      continue;
    }
    n++;
  }
  double el = (double)(now_ns() - t0) / 1e9;
  printf("scrapes %ld\n", n);
  printf("scrapes_per_s %.0f\n", el > 0 ? (double)n / el : 0.0);
  printf("bytes_per_scrape %zu\n", n ? bytes / (size_t)n : (size_t)0);
  printf("failures %ld\n", fails);
  curl_slist_free_all(hdr);
  curl_easy_cleanup(c);
  curl_global_cleanup();
  return rc;
}

/* ---- concurrent ------------------------------------------------------------------------- */

#define MAX_SCRAPERS 64
#define SCRAPER_SAMPLES 20000

struct scraper {
  const char *url;
  uint64_t end_ns;
  uint64_t lat[SCRAPER_SAMPLES];
  size_t n;
  long fails;
  pthread_t t;
};

static void *scraper_run(void *ud) {
  struct scraper *s = ud;
  CURL *c = curl_easy_init();
  if (!c)
    return NULL;
  size_t bytes = 0;
  struct curl_slist *hdr = curl_slist_append(NULL, "Accept-Encoding: gzip");
  curl_easy_setopt(c, CURLOPT_URL, s->url);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 30000L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &bytes);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
  while (s->n < SCRAPER_SAMPLES && now_ns() < s->end_ns) {
    uint64_t t0 = now_ns();
    CURLcode cc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    if (cc != CURLE_OK || code != 200)
      s->fails++;
    else
      s->lat[s->n++] = now_ns() - t0;
  }
  curl_slist_free_all(hdr);
  curl_easy_cleanup(c);
  return NULL;
}

/* One round: SCRAPERS clients for SECONDS against ctx served by the agent's HTTP server. */
static int concurrent_round(struct metrics_ctx *ctx, int scrapers, double seconds,
                            const char *key) {
  struct http_route route = {"/metrics", metrics_handle, ctx};
  struct http_server *srv = NULL;
  char err[256], url[64];
  if (http_server_start("127.0.0.1:0", &route, 1, &srv, err, sizeof err)) {
    fprintf(stderr, "http_server_start: %s\n", err);
    return 1;
  }
  snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", http_server_port(srv));
  struct scraper *s = calloc((size_t)scrapers, sizeof *s);
  uint64_t *all = malloc((size_t)scrapers * SCRAPER_SAMPLES * sizeof *all);
  if (!s || !all) {
    free(s);
    free(all);
    http_server_stop(srv);
    return 1;
  }
  uint64_t end = now_ns() + (uint64_t)(seconds * 1e9);
  for (int i = 0; i < scrapers; i++) {
    s[i].url = url;
    s[i].end_ns = end;
    pthread_create(&s[i].t, NULL, scraper_run, &s[i]);
  }
  size_t n = 0;
  long fails = 0;
  for (int i = 0; i < scrapers; i++) {
    pthread_join(s[i].t, NULL);
    memcpy(all + n, s[i].lat, s[i].n * sizeof *all);
    n += s[i].n;
    fails += s[i].fails;
  }
  http_server_stop(srv);
  qsort(all, n, sizeof *all, cmp_u64);
  printf("%s_scrapes %zu\n", key, n);
  printf("%s_scrapes_per_s %.0f\n", key, (double)n / seconds);
  printf("%s_median_ms %.2f\n", key, n ? (double)all[n / 2] / 1e6 : 0.0);
  printf("%s_p99_ms %.2f\n", key, n ? (double)all[(n * 99) / 100] / 1e6 : 0.0);
  printf("%s_failures %ld\n", key, fails);
  free(s);
  free(all);
  return fails ? 1 : 0;
}

static int cmd_concurrent(int argc, char **argv) {
  if (argc < 3)
    return 2;
  long ngpus = strtol(argv[0], NULL, 10), scrapers = strtol(argv[1], NULL, 10);
  double seconds = strtod(argv[2], NULL);
  if (ngpus < 1 || ngpus > 1024 || scrapers < 1 || scrapers > MAX_SCRAPERS ||
      !(seconds > 0 && seconds <= 60))
    return 2;
  if (curl_global_init(CURL_GLOBAL_DEFAULT))
    return 1;
  struct metrics_mock *mm = metrics_mock_new((size_t)ngpus);
  struct scrape_flight *f = scrape_flight_new();
  int rc = 1;
  if (mm && f) {
    struct metrics_ctx *ctx = metrics_mock_ctx(mm);
    ctx->flight = NULL;
    rc = concurrent_round(ctx, (int)scrapers, seconds, "each");
    ctx->flight = f;
    rc |= concurrent_round(ctx, (int)scrapers, seconds, "coalesced");
    printf("coalesced_renders %llu\n", (unsigned long long)scrape_flight_renders(f));
  }
  scrape_flight_free(f);
  metrics_mock_free(mm);
  curl_global_cleanup();
  return rc;
}

static void usage(void) {
  fprintf(stderr, "usage: gs_metrics_bench render NGPUS [SECONDS]\n"
                  "       gs_metrics_bench serve-static PLAIN_FILE GZIP_FILE\n"
                  "       gs_metrics_bench scrape URL SECONDS [gzip]\n"
                  "       gs_metrics_bench concurrent NGPUS SCRAPERS SECONDS\n");
}

int main(int argc, char **argv) {
  int rc = 2;
  if (argc >= 2 && strcmp(argv[1], "render") == 0)
    rc = cmd_render(argc - 2, argv + 2);
  else if (argc >= 2 && strcmp(argv[1], "serve-static") == 0)
    rc = cmd_serve_static(argc - 2, argv + 2);
  else if (argc >= 2 && strcmp(argv[1], "scrape") == 0)
    rc = cmd_scrape(argc - 2, argv + 2);
  else if (argc >= 2 && strcmp(argv[1], "concurrent") == 0)
    rc = cmd_concurrent(argc - 2, argv + 2);
  if (rc == 2)
    usage();
  return rc;
}
