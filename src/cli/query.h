/* `gpuscale query`: call an ExternalScaler exactly as KEDA does and print spec, value, activity. */
#ifndef GS_QUERY_H
#define GS_QUERY_H

/* Runs the command; argv[0] is "query". Initialises and shuts down gRPC itself, so main.c must
 * not have called rpc_global_init. Returns the process exit status: 0 success (or --help, or
 * --watch ended by SIGINT/SIGTERM or a clean end of stream), 1 an RPC failed (the RPC, status
 * name and message are printed on stderr), 2 a usage error. */
int query_main(int argc, char **argv);

#endif
