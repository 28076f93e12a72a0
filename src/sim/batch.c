/* The continuous-batching server as a fluid model, and the request FIFO's delays. */
#include "sim/batch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double min2(double a, double b) {
  return a < b ? a : b;
}

/* Sequences one replica runs at most with requests of mean lengths (in, out): its batch, or what
 * its KV cache holds when each running request holds its prompt and, on average, half of its
 * output (a request is on average halfway through its decode). */
static double seq_limit(const struct sim_batching *b, double in, double out) {
  double per = in + out / 2;
  return per > 0 ? min2(b->max_num_seqs, b->kv_tokens / per) : b->max_num_seqs;
}

/* One sequence's decode speed with n sequences in the batch: the stream speed while the batch is
 * small (memory-bound), a share of the full batch's throughput once it is large. */
static double seq_speed(const struct sim_batching *b, double n) {
  return n > 0 ? min2(b->stream_tps, b->decode_tps / n) : b->stream_tps;
}

double sim_batch_capacity(const struct sim_batching *b, double in, double out) {
  in = in > 1 ? in : 1;
  out = out > 1 ? out : 1;
  /* compute: each request's prefill and decode take in / prefill + out / decode of a second */
  double compute = 1 / (in / b->prefill_tps + out / b->decode_tps);
  /* the batch: n sequences at v tokens/s finish n v / out requests a second */
  double n = seq_limit(b, in, out), batch = n * seq_speed(b, n) / out;
  return min2(compute, batch);
}

static void take(double *cnt, double *in, double *out, double k) {
  if (*cnt <= 0 || k <= 0)
    return;
  double f = k >= *cnt ? 1 : k / *cnt;
  *in -= *in * f;
  *out -= *out * f;
  *cnt -= k >= *cnt ? *cnt : k;
  if (*cnt < 1e-12) {
    *cnt = *in = *out = 0;
  }
}

/* Admits up to `most` waiting requests to the batch: its free sequences, the KV cache's room (a
 * request holding its prompt and half its output) and the prefill budget `prefill_room`
 * (requests). Returns how many. */
static double admit(const struct sim_batching *b, struct sim_batch *st, double r, double most,
                    double prefill_room) {
  if (r <= 0 || st->wait <= 0)
    return 0;
  double iq = st->wait_in / st->wait > 1 ? st->wait_in / st->wait : 1;
  double oq = st->wait_out / st->wait > 1 ? st->wait_out / st->wait : 1;
  double slots = r * b->max_num_seqs - st->run;
  double kv_room = (r * b->kv_tokens - (st->run_in + st->run_out / 2)) / (iq + oq / 2);
  double k = min2(min2(most, st->wait), min2(slots, min2(kv_room, prefill_room)));
  if (!(k > 0))
    return 0;
  double f = k / st->wait;
  st->run += k;
  st->run_in += st->wait_in * f;
  st->run_out += st->wait_out * f;
  take(&st->wait, &st->wait_in, &st->wait_out, k);
  return k;
}

void sim_batch_step(const struct sim_batching *b, struct sim_batch *st, int ready,
                    double queue_per_pod, double arrivals, double in_tok, double out_tok,
                    struct sim_batch_step *o) {
  memset(o, 0, sizeof *o);
  st->wait += arrivals;
  st->wait_in += in_tok;
  st->wait_out += out_tok;
  double r = ready > 0 ? ready : 0;
  double iq = st->wait > 0 ? st->wait_in / st->wait : b->input_tokens;
  iq = iq > 1 ? iq : 1;
  o->prefill_s = iq / b->prefill_tps;
  /* decode first (vLLM V1's scheduler serves the running requests, then fills the step's token
   * budget with waiting requests' prefill): n sequences at v tokens/s use n v / decode of the
   * second, and prefill has the rest */
  double n0 = r > 0 ? st->run / r : 0, v0 = seq_speed(b, n0);
  double d = r > 0 ? min2(1, n0 * v0 / b->decode_tps) : 0;
  double room = r * (1 - d) * b->prefill_tps / iq, k = admit(b, st, r, INFINITY, room);
  double run_avg = st->run, ir = 0, orr = 1, v = 0;
  if (r > 0 && st->run > 0) {
    ir = st->run_in / st->run;
    orr = st->run_out / st->run > 1 ? st->run_out / st->run : 1;
    v = seq_speed(b, st->run / r);
    double rate = v / orr, c;
    if (st->wait > 0) {
      /* saturated: a finished sequence's slot is refilled from the queue at once, so the batch
       * stays full all second and finishes run x rate requests */
      c = min2(st->run, st->run * rate);
      run_avg = st->run;
    } else {
      /* each sequence finishes after orr tokens at v tokens/s: the running count decays as
       * exp(-rate t), so completions are run (1 - e^-rate) and the time average is
       * run (1 - e^-rate) / rate: Little's law, L = lambda W */
      c = st->run * (1 - exp(-rate));
      run_avg = c / rate;
    }
    o->completed = c;
    take(&st->run, &st->run_in, &st->run_out, c);
    if (st->wait > 0)
      k += admit(b, st, r, c, room - k);
  }
  o->admitted = k;
  double limit = queue_per_pod * r;
  if (st->wait > limit) {
    o->dropped = st->wait - limit;
    /* the newest are dropped; their lengths are the queue's mean */
    take(&st->wait, &st->wait_in, &st->wait_out, o->dropped);
  }
  if (r <= 0)
    return;
  o->running = run_avg / r;
  o->waiting = st->wait / r;
  o->kv_pct = 100 * o->running * (ir + orr / 2) / b->kv_tokens;
  o->kv_pct = o->kv_pct > 100 ? 100 : o->kv_pct;
  o->inflight_pct = 100 * (o->running + o->waiting) / b->max_num_seqs;
  o->busy = min2(1, o->running * v / b->decode_tps + k * iq / (r * b->prefill_tps));
}

/* ---- the request FIFO ---- */

static int grow(struct sim_wait *w) {
  size_t nc = w->cap ? w->cap * 2 : 256;
  double *t = malloc(nc * sizeof *t), *m = malloc(nc * sizeof *m);
  if (!t || !m) {
    free(t);
    free(m);
    w->oom = true;
    return -1;
  }
  for (size_t i = 0; i < w->len; i++) {
    t[i] = w->t[(w->head + i) % w->cap];
    m[i] = w->mass[(w->head + i) % w->cap];
  }
  free(w->t);
  free(w->mass);
  w->t = t;
  w->mass = m;
  w->cap = nc;
  w->head = 0;
  return 0;
}

void sim_wait_arrive(struct sim_wait *w, double now, double mass) {
  if (!(mass > 0))
    return;
  if (w->len) {
    size_t last = (w->head + w->len - 1) % w->cap;
    if (w->t[last] == now) {
      w->mass[last] += mass;
      return;
    }
  }
  if (w->len == w->cap && grow(w))
    return;
  size_t at = (w->head + w->len) % w->cap;
  w->t[at] = now;
  w->mass[at] = mass;
  w->len++;
}

static void record(struct sim_wait *w, double delay, double mass) {
  size_t bin = delay < 0 ? 0 : delay >= SIM_WAIT_BINS ? SIM_WAIT_BINS : (size_t)delay;
  w->hist[bin] += mass;
  w->total += mass;
}

void sim_wait_admit(struct sim_wait *w, double now, double mass) {
  while (mass > 1e-12 && w->len) {
    double *m = &w->mass[w->head];
    double k = *m < mass ? *m : mass;
    record(w, now - w->t[w->head], k);
    *m -= k;
    mass -= k;
    if (*m <= 1e-12) {
      w->head = (w->head + 1) % w->cap;
      w->len--;
    }
  }
}

void sim_wait_drop(struct sim_wait *w, double mass) {
  while (mass > 1e-12 && w->len) {
    size_t last = (w->head + w->len - 1) % w->cap;
    double k = w->mass[last] < mass ? w->mass[last] : mass;
    w->mass[last] -= k;
    mass -= k;
    if (w->mass[last] <= 1e-12)
      w->len--;
  }
}

void sim_wait_finish(struct sim_wait *w, double now) {
  for (size_t i = 0; i < w->len; i++) {
    size_t at = (w->head + i) % w->cap;
    record(w, now - w->t[at], w->mass[at]);
  }
  w->len = 0;
}

double sim_wait_quantile(const struct sim_wait *w, double q) {
  if (!(w->total > 0))
    return 0;
  double acc = 0, want = q * w->total;
  for (size_t i = 0; i <= SIM_WAIT_BINS; i++) {
    acc += w->hist[i];
    if (acc >= want - 1e-9)
      return (double)i;
  }
  return SIM_WAIT_BINS;
}

void sim_wait_free(struct sim_wait *w) {
  free(w->t);
  free(w->mass);
  w->t = w->mass = NULL;
  w->cap = w->len = w->head = 0;
}
