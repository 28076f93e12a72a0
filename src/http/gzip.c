/* gzip a buffer with zlib's deflate: windowBits 31 selects the gzip wrapper instead of zlib's. */
#include "http/gzip.h"

#include <string.h>
#include <zlib.h>

#include "core/err.h"

#define GZIP_WINDOW_BITS (15 + 16) /* 32 KiB window, gzip header and trailer */
#define GZIP_CHUNK 16384

int gzip_compress(const void *in, size_t len, struct buf *out) {
  z_stream z;
  memset(&z, 0, sizeof z);
  /* Level 1: /metrics text compresses ~10x even at the fastest level; a scrape should cost
   * little CPU on the node it measures. */
  int zrc = deflateInit2(&z, 1, Z_DEFLATED, GZIP_WINDOW_BITS, 8, Z_DEFAULT_STRATEGY);
  if (zrc != Z_OK)
    return zrc == Z_MEM_ERROR ? GS_ENOMEM : GS_EIO;
  const unsigned char *p = in;
  size_t left = len;
  unsigned char chunk[GZIP_CHUNK];
  int rc = 0;
  int flush;
  do {
    /* avail_in is a uInt: feed at most 1 GiB at a time. */
    if (z.avail_in == 0 && left > 0) {
      size_t take = left > (1u << 30) ? (1u << 30) : left;
      z.next_in = (Bytef *)p;
      z.avail_in = (uInt)take;
      p += take;
      left -= take;
    }
    flush = left == 0 ? Z_FINISH : Z_NO_FLUSH;
    do {
      z.next_out = chunk;
      z.avail_out = sizeof chunk;
      zrc = deflate(&z, flush);
      if (zrc == Z_STREAM_ERROR) {
        rc = GS_EIO;
        goto out;
      }
      size_t have = sizeof chunk - z.avail_out;
      if (have && (rc = buf_append(out, chunk, have)) != 0)
        goto out;
    } while (z.avail_out == 0);
  } while (flush != Z_FINISH);
  if (zrc != Z_STREAM_END)
    rc = GS_EIO;
out:
  deflateEnd(&z);
  return rc;
}
