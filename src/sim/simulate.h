/* `gpuscale simulate`: replays a demand trace through KEDA + HPA + the scaler policy, offline. */
#ifndef GS_SIM_SIMULATE_H
#define GS_SIM_SIMULATE_H

/* argv[0] is "simulate". Returns the process exit status: 0, 1 (a run failed) or 2 (bad
 * arguments or input). */
int simulate_main(int argc, char **argv);

#endif
