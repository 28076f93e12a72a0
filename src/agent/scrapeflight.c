/* One render per burst of scrapes: Prometheus HA pairs, federation and a curl at the same moment
 * need not each pay for a snapshot, the pod join and the text (dcgm-exporter 4.8.4's release
 * notes describe the same coalescing). A waiting scrape gets a body no older than its own arrival's
 * render, never an old cached one. */
#include "agent/scrapeflight.h"

#include <pthread.h>
#include <stdlib.h>

#include "core/err.h"
#include "http/gzip.h"
#include "http/server.h"

struct scrape_flight {
  pthread_mutex_t mu;
  pthread_cond_t done;
  bool running;     /* a render is under way */
  uint64_t gen;     /* renders finished */
  unsigned waiting; /* callers waiting for the render under way */
  int rc;           /* the last render's result */
  struct buf plain; /* ... and its body */
  bool gz_made;     /* gz holds plain gzipped (gz_rc its result) */
  int gz_rc;
  struct buf gz;
};

struct scrape_flight *scrape_flight_new(void) {
  struct scrape_flight *f = calloc(1, sizeof *f);
  if (!f)
    return NULL;
  pthread_mutex_init(&f->mu, NULL);
  pthread_cond_init(&f->done, NULL);
  buf_init(&f->plain, HTTP_BODY_MAX);
  buf_init(&f->gz, HTTP_BODY_MAX);
  return f;
}

void scrape_flight_free(struct scrape_flight *f) {
  if (!f)
    return;
  buf_free(&f->plain);
  buf_free(&f->gz);
  pthread_cond_destroy(&f->done);
  pthread_mutex_destroy(&f->mu);
  free(f);
}

/* Appends the last render's body to out (f->mu held). */
static int copy_body(struct scrape_flight *f, bool gz, struct buf *out) {
  if (f->rc)
    return f->rc;
  if (!gz)
    return buf_append(out, f->plain.data ? f->plain.data : "", f->plain.len);
  if (!f->gz_made) {
    buf_reset(&f->gz);
    f->gz_rc = gzip_compress(f->plain.data ? f->plain.data : "", f->plain.len, &f->gz);
    f->gz_made = true;
  }
  return f->gz_rc ? f->gz_rc : buf_append(out, f->gz.data ? f->gz.data : "", f->gz.len);
}

int scrape_flight_serve(struct scrape_flight *f, int (*render)(void *ud, struct buf *body),
                        void *ud, bool gz, struct buf *out, bool *shared) {
  pthread_mutex_lock(&f->mu);
  bool follower = f->running;
  if (follower) {
    uint64_t g = f->gen;
    f->waiting++;
    while (f->gen == g)
      pthread_cond_wait(&f->done, &f->mu);
    f->waiting--;
  } else {
    f->running = true;
    pthread_mutex_unlock(&f->mu);
    struct buf body;
    buf_init(&body, HTTP_BODY_MAX);
    int rc = render(ud, &body);
    pthread_mutex_lock(&f->mu);
    buf_free(&f->plain);
    f->plain = body;
    f->rc = rc;
    f->gz_made = false;
    f->gen++;
    f->running = false;
    pthread_cond_broadcast(&f->done);
  }
  size_t len = out->len;
  int rc = copy_body(f, gz, out);
  pthread_mutex_unlock(&f->mu);
  if (rc && out->data) { /* untouched: the caller answers an error */
    out->len = len;
    out->data[len] = '\0';
  }
  if (shared)
    *shared = follower;
  return rc;
}

uint64_t scrape_flight_renders(struct scrape_flight *f) {
  pthread_mutex_lock(&f->mu);
  uint64_t n = f->gen;
  pthread_mutex_unlock(&f->mu);
  return n;
}

unsigned scrape_flight_waiting(struct scrape_flight *f) {
  pthread_mutex_lock(&f->mu);
  unsigned n = f->waiting;
  pthread_mutex_unlock(&f->mu);
  return n;
}
