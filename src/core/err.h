/* Project-wide error codes: 0 or a negative GS_E* value, mapped to gRPC/HTTP only at the edge. */
#ifndef GS_ERR_H
#define GS_ERR_H

enum {
  GS_OK = 0,
  GS_ENOMEM = -1,    /* allocation failed */
  GS_EPARSE = -2,    /* malformed input (file, payload) */
  GS_EINVAL = -3,    /* well-formed but not allowed (bad metadata value) */
  GS_EUNAVAIL = -4,  /* no fresh reading / backend not reachable */
  GS_ENOTFOUND = -5, /* a named thing (GPU index, profile) does not exist */
  GS_EIO = -6,       /* system call or library failed */
  GS_ETOOBIG = -7,   /* input over its size cap */
  GS_ENOTSUP = -8,   /* field or feature not supported by this backend */
  GS_ELOST = -9,     /* GPU fell off the bus / needs reset */
};

/* Returns a static, human-readable name for a GS_E* code. */
const char *gs_strerror(int code);

#endif
