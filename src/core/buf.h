/* Growable byte buffer with a mandatory size cap, for HTTP bodies, JSON and payloads. */
#ifndef GS_BUF_H
#define GS_BUF_H

#include <stdarg.h>
#include <stddef.h>

struct buf {
  char *data; /* always NUL-terminated when non-NULL */
  size_t len;
  size_t cap;
  size_t max; /* hard cap on len; appends beyond it fail with GS_ETOOBIG */
};

/* Initialises an empty buffer that may grow to at most max bytes. */
void buf_init(struct buf *b, size_t max);
/* Appends n bytes. Returns 0, GS_ETOOBIG (nothing appended) or GS_ENOMEM. */
int buf_append(struct buf *b, const void *p, size_t n);
/* Appends a C string. Same returns as buf_append. */
int buf_puts(struct buf *b, const char *s);
/* Appends printf-formatted text. Same returns as buf_append. */
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int buf_vprintf(struct buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Empties the buffer, keeping its memory. */
void buf_reset(struct buf *b);
/* Releases the memory; the buffer may be reused after buf_init. buf_free(NULL) is fine. */
void buf_free(struct buf *b);
/* Hands ownership of data to the caller (free() it) and leaves b empty. */
char *buf_steal(struct buf *b);

#endif
