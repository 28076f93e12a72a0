/* gRPC status codes as plain ints: names, and the mapping from GS_E* errors at the edge. */
#ifndef GS_RPC_STATUS_H
#define GS_RPC_STATUS_H

/* The gRPC status codes (same numbers as grpc_status_code), so that callers outside src/rpc/
 * never need <grpc/grpc.h>. */
enum rpc_code {
  RPC_OK = 0,
  RPC_CANCELLED = 1,
  RPC_UNKNOWN = 2,
  RPC_INVALID_ARGUMENT = 3,
  RPC_DEADLINE_EXCEEDED = 4,
  RPC_NOT_FOUND = 5,
  RPC_ALREADY_EXISTS = 6,
  RPC_PERMISSION_DENIED = 7,
  RPC_RESOURCE_EXHAUSTED = 8,
  RPC_FAILED_PRECONDITION = 9,
  RPC_ABORTED = 10,
  RPC_OUT_OF_RANGE = 11,
  RPC_UNIMPLEMENTED = 12,
  RPC_INTERNAL = 13,
  RPC_UNAVAILABLE = 14,
  RPC_DATA_LOSS = 15,
  RPC_UNAUTHENTICATED = 16,
};

/* Longest status message (gRPC status details) handled whole, both ways: the server cuts a
 * longer one (ending it with "..."), clients keep this much of what they receive. Coverage
 * errors with their list of missing nodes need more than a line. */
#define RPC_STATUS_MSG_MAX 2048

/* What a finished call ended with: the code and the server's message (status details),
 * truncated to fit. */
struct rpc_status {
  int code;
  char msg[RPC_STATUS_MSG_MAX];
};

/* "INVALID_ARGUMENT" for 3 and so on; "CODE_<n>" style text is never returned: unknown
 * numbers give "UNKNOWN_CODE". Static string. */
const char *rpc_code_name(int code);
/* Maps a GS_E* error to the status a handler answers with: GS_EINVAL/GS_EPARSE ->
 * INVALID_ARGUMENT, GS_ENOTFOUND -> NOT_FOUND, GS_EUNAVAIL/GS_ELOST -> UNAVAILABLE,
 * GS_ETOOBIG -> RESOURCE_EXHAUSTED, 0 -> OK, anything else -> INTERNAL. */
int rpc_code_from_gs(int gs);
/* The reverse, for clients: OK -> 0, INVALID_ARGUMENT -> GS_EINVAL, NOT_FOUND -> GS_ENOTFOUND,
 * UNAVAILABLE/DEADLINE_EXCEEDED -> GS_EUNAVAIL, RESOURCE_EXHAUSTED -> GS_ETOOBIG,
 * UNIMPLEMENTED -> GS_ENOTSUP, anything else -> GS_EIO. */
int rpc_gs_from_code(int code);

#endif
