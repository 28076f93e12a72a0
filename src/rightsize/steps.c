/* Per-step states of a GPU as runs (see steps.h). */
#include "rightsize/steps.h"

#include <stdlib.h>
#include <string.h>

#include "core/err.h"

static size_t words_of(size_t n_steps) {
  return (n_steps + 63) / 64;
}

static void set_bits(uint64_t *has, uint64_t *busy, size_t k, size_t n, unsigned state) {
  if (state == RS_STEP_NONE)
    return;
  for (size_t i = k; i < k + n; i++) {
    has[i / 64] |= 1ULL << (i % 64);
    if (state == RS_STEP_BUSY)
      busy[i / 64] |= 1ULL << (i % 64);
  }
}

/* Decodes the runs (and the open one) into zeroed has/busy. */
static void decode(const struct rs_steps *s, uint64_t *has, uint64_t *busy) {
  size_t k = 0;
  for (uint32_t p = 0; p < s->len;) {
    uint64_t v = 0;
    for (unsigned shift = 0; p < s->len; shift += 7) {
      uint8_t c = s->rle[p++];
      v |= (uint64_t)(c & 0x7f) << shift;
      if (!(c & 0x80))
        break;
    }
    set_bits(has, busy, k, (size_t)(v >> 2), (unsigned)(v & 3));
    k += (size_t)(v >> 2);
  }
  set_bits(has, busy, k, s->run, s->state);
}

/* Switches s to bit arrays. */
static int to_raw(struct rs_steps *s, size_t n_steps) {
  size_t w = words_of(n_steps);
  uint64_t *raw = calloc(2 * w + 1, sizeof(*raw));
  if (!raw)
    return GS_ENOMEM;
  decode(s, raw, raw + w);
  s->run = 0;
  free(s->rle);
  s->rle = NULL;
  s->len = s->cap = 0;
  s->raw = raw;
  return 0;
}

/* Closes the open run: appends its varint. */
static int emit(struct rs_steps *s, size_t n_steps) {
  uint8_t tmp[10];
  size_t n = 0;
  for (uint64_t v = (uint64_t)s->run << 2 | s->state;; v >>= 7) {
    tmp[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    if (v <= 0x7f)
      break;
  }
  if (s->len + n > 2 * words_of(n_steps) * sizeof(uint64_t)) /* runs no smaller than bits */
    return to_raw(s, n_steps);
  if (s->len + n > s->cap) {
    uint32_t cap = s->cap ? 2 * s->cap : 8;
    while (cap < s->len + n)
      cap *= 2;
    uint8_t *r = realloc(s->rle, cap);
    if (!r)
      return GS_ENOMEM;
    s->rle = r;
    s->cap = cap;
  }
  memcpy(s->rle + s->len, tmp, n);
  s->len += (uint32_t)n;
  s->run = 0;
  return 0;
}

/* Appends n steps of state. */
static int extend(struct rs_steps *s, size_t n_steps, unsigned state, size_t n) {
  if (s->run && s->state != state) {
    int rc = emit(s, n_steps);
    if (rc)
      return rc;
    if (s->raw) { /* the runs grew past the bits: the rest goes there */
      set_bits(s->raw, s->raw + words_of(n_steps), s->next, n, state);
      s->next += (uint32_t)n;
      return 0;
    }
  }
  s->state = (uint8_t)state;
  s->run += (uint32_t)n;
  s->next += (uint32_t)n;
  return 0;
}

int rs_steps_set(struct rs_steps *s, size_t n_steps, size_t k, bool busy) {
  if (k >= n_steps)
    return 0;
  unsigned state = busy ? RS_STEP_BUSY : RS_STEP_IDLE;
  if (!s->raw && k < s->next) { /* out of order, or set again: bits from here on */
    int rc = to_raw(s, n_steps);
    if (rc)
      return rc;
  }
  if (s->raw) {
    set_bits(s->raw, s->raw + words_of(n_steps), k, 1, state);
    return 0;
  }
  int rc = k > s->next ? extend(s, n_steps, RS_STEP_NONE, k - s->next) : 0;
  if (!rc && s->raw) /* the gap's run passed the bits */
    return rs_steps_set(s, n_steps, k, busy);
  return rc ? rc : extend(s, n_steps, state, 1);
}

void rs_steps_bits(const struct rs_steps *s, size_t n_steps, uint64_t *has, uint64_t *busy) {
  size_t w = words_of(n_steps);
  if (s->raw) {
    memcpy(has, s->raw, w * sizeof(*has));
    memcpy(busy, s->raw + w, w * sizeof(*busy));
    return;
  }
  memset(has, 0, w * sizeof(*has));
  memset(busy, 0, w * sizeof(*busy));
  decode(s, has, busy);
}

size_t rs_steps_bytes(const struct rs_steps *s, size_t n_steps) {
  return s->raw ? 2 * words_of(n_steps) * sizeof(uint64_t) : s->cap;
}

void rs_steps_free(struct rs_steps *s) {
  free(s->rle);
  free(s->raw);
  memset(s, 0, sizeof(*s));
}
