/* Process-wide gRPC C-core init and shutdown, so that main.c never includes <grpc/grpc.h>. */
#include "rpc/rpc.h"

#include <grpc/grpc.h>

void rpc_global_init(void) {
  grpc_init();
}

void rpc_global_shutdown(void) {
  grpc_shutdown();
}
