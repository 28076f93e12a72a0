/* `gpuscale agent`: wires collector, sampler, history, scaler policy, gRPC and HTTP. */
#ifndef GS_AGENT_H
#define GS_AGENT_H

/* Runs the agent until SIGTERM/SIGINT. argv[0] is "agent". Returns the process exit code:
 * 0 after a graceful stop, 1 when it cannot start, 2 for bad options. */
int agent_main(int argc, char **argv);

#endif
