/* gRPC status code names and the GS_E* <-> gRPC code mapping used at the transport edge. */
#include "rpc/status.h"

#include <stddef.h>

#include "core/err.h"

static const char *const code_names[] = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};

const char *rpc_code_name(int code) {
  if (code < 0 || (size_t)code >= sizeof(code_names) / sizeof(code_names[0]))
    return "UNKNOWN_CODE";
  return code_names[code];
}

int rpc_code_from_gs(int gs) {
  switch (gs) {
  case GS_OK: return RPC_OK;
  case GS_EINVAL:
  case GS_EPARSE: return RPC_INVALID_ARGUMENT;
  case GS_ENOTFOUND: return RPC_NOT_FOUND;
  case GS_EUNAVAIL:
  case GS_ELOST: return RPC_UNAVAILABLE;
  case GS_ETOOBIG: return RPC_RESOURCE_EXHAUSTED;
  default: return RPC_INTERNAL;
  }
}

int rpc_gs_from_code(int code) {
  switch (code) {
  case RPC_OK: return GS_OK;
  case RPC_INVALID_ARGUMENT: return GS_EINVAL;
  case RPC_NOT_FOUND: return GS_ENOTFOUND;
  case RPC_UNAVAILABLE:
  case RPC_DEADLINE_EXCEEDED: return GS_EUNAVAIL;
  case RPC_RESOURCE_EXHAUSTED: return GS_ETOOBIG;
  case RPC_UNIMPLEMENTED: return GS_ENOTSUP;
  default: return GS_EIO;
  }
}
