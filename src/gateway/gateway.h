/* `gpuscale gateway`: one KEDA ExternalScaler for the whole cluster, fed by every agent's node API.
 */
#ifndef GS_GATEWAY_H
#define GS_GATEWAY_H

/* Runs the gateway until SIGTERM/SIGINT. argv[0] is "gateway". Returns 0 after a graceful stop,
 * 1 when it cannot start, 2 for bad options. */
int gateway_main(int argc, char **argv);

#endif
