/* gzip (RFC 1952) compression of a response body with zlib, for clients that accept it. */
#ifndef GS_GZIP_H
#define GS_GZIP_H

#include <stddef.h>

#include "core/buf.h"

/* Appends the gzip encoding of in[0..len) to out (which keeps its own size cap). Returns 0,
 * GS_ETOOBIG (out's cap reached), GS_ENOMEM, or GS_EIO when zlib fails; on error out may hold
 * a partial stream, so the caller should discard it. */
int gzip_compress(const void *in, size_t len, struct buf *out);

#endif
