/* Names for the project-wide error codes. */
#include "core/err.h"

const char *gs_strerror(int code) {
  switch (code) {
  case GS_OK: return "ok";
  case GS_ENOMEM: return "out of memory";
  case GS_EPARSE: return "parse error";
  case GS_EINVAL: return "invalid argument";
  case GS_EUNAVAIL: return "unavailable";
  case GS_ENOTFOUND: return "not found";
  case GS_EIO: return "i/o error";
  case GS_ETOOBIG: return "too big";
  case GS_ENOTSUP: return "not supported";
  case GS_ELOST: return "gpu lost";
  default: return "unknown error";
  }
}
