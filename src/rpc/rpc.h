/* Process-wide gRPC library lifetime; the only entry points main.c needs besides server/client. */
#ifndef GS_RPC_H
#define GS_RPC_H

/* Initialises gRPC C-core (grpc_init). Call once from the main thread after blocking SIGTERM and
 * SIGINT (gRPC's threads inherit the mask) and before any rpc_server_* or rpc_client_* call.
 * Never fork afterwards. */
void rpc_global_init(void);
/* Releases gRPC C-core (grpc_shutdown). Call last, after every server was shut down and every
 * client and stream freed; LSan is clean only then. */
void rpc_global_shutdown(void);

#endif
