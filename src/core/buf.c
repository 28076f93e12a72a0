/* Growable, size-capped byte buffer. */
#include "core/buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

void buf_init(struct buf *b, size_t max) {
  b->data = NULL;
  b->len = 0;
  b->cap = 0;
  b->max = max;
}

static int buf_reserve(struct buf *b, size_t extra) {
  if (extra > b->max || b->len > b->max - extra)
    return GS_ETOOBIG;
  size_t need = b->len + extra + 1;
  if (need <= b->cap)
    return 0;
  size_t ncap = b->cap ? b->cap : 256;
  while (ncap < need)
    ncap *= 2;
  if (ncap > b->max + 1)
    ncap = b->max + 1;
  char *p = realloc(b->data, ncap);
  if (!p)
    return GS_ENOMEM;
  b->data = p;
  b->cap = ncap;
  return 0;
}

int buf_append(struct buf *b, const void *p, size_t n) {
  int rc = buf_reserve(b, n);
  if (rc)
    return rc;
  if (n)
    memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = '\0';
  return 0;
}

int buf_puts(struct buf *b, const char *s) {
  return buf_append(b, s, strlen(s));
}

int buf_vprintf(struct buf *b, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0)
    return GS_EPARSE;
  int rc = buf_reserve(b, (size_t)n);
  if (rc)
    return rc;
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  b->len += (size_t)n;
  return 0;
}

int buf_printf(struct buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = buf_vprintf(b, fmt, ap);
  va_end(ap);
  return rc;
}

void buf_reset(struct buf *b) {
  b->len = 0;
  if (b->data)
    b->data[0] = '\0';
}

void buf_free(struct buf *b) {
  if (!b)
    return;
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

char *buf_steal(struct buf *b) {
  char *p = b->data;
  if (!p)
    p = calloc(1, 1);
  b->data = NULL;
  b->len = b->cap = 0;
  return p;
}
