/* gpuscale: command dispatch for agent, gateway, query, lint, rightsize, simulate, burn and
 * version. */
#include <stdio.h>
#include <string.h>

#include "agent/agent.h"
#include "burn/burn.h"
#include "cli/completion.h"
#include "cli/lint.h"
#include "cli/query.h"
#include "gateway/gateway.h"
#include "rightsize/drain.h"
#include "rightsize/rightsize.h"
#include "sim/simulate.h"

/* What completion offers first: the commands of usage(), in its order. */
#define COMMANDS "agent gateway query lint rightsize simulate burn completion version help"

static void usage(FILE *f) {
  fprintf(
      f,
      "gpuscale %s: GPU-aware autoscaling for Kubernetes (KEDA, HPA, rightsizing)\n\n"
      "Usage: gpuscale <command> [options]\n\n"
      "Commands:\n"
      "  agent      per-node agent: samples GPUs, serves KEDA ExternalScaler (gRPC) and HTTP\n"
      "  gateway    one ExternalScaler for the cluster or a workload, fed by every agent\n"
      "  query      call an ExternalScaler exactly as KEDA does and print spec, value, activity\n"
      "  rightsize  find idle and oversized GPUs in Prometheus history, price them, report\n"
      "  simulate   replay a demand trace through KEDA + HPA + the scaler policy, offline\n"
      "  lint       check the gpuscale triggers of ScaledObjects in YAML files, offline\n"
      "  burn       drive one GPU to a target utilisation and memory (load for testing scaling)\n"
      "  completion print the shell completion script: gpuscale completion bash|zsh\n"
      "  version    print the version\n\n"
      "Run 'gpuscale <command> --help' for a command's options.\n"
      "Quick try without a GPU:  gpuscale agent --collector mock\n",
      GPUSCALE_VERSION);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "agent"))
    return agent_main(argc - 1, argv + 1);
  if (!strcmp(cmd, "gateway"))
    return gateway_main(argc - 1, argv + 1);
  if (!strcmp(cmd, "rightsize"))
    return rightsize_main(argc - 1, argv + 1);
  /* developer entry: drain named nodes (docs/rightsize-apply.md) */
  if (!strcmp(cmd, "rightsize-drain"))
    return rightsize_drain_main(argc - 1, argv + 1);
  if (!strcmp(cmd, "query"))
    return query_main(argc - 1, argv + 1);
  if (!strcmp(cmd, "lint"))
    return lint_main(argc - 1, argv + 1);
  if (!strcmp(cmd, "simulate"))
    return simulate_main(argc - 1, argv + 1);
  if (!strcmp(cmd, "burn")) /* the only command that loads libcuda */
    return burn_main(argc - 1, argv + 1);
  if (!strcmp(cmd, "completion"))
    return completion_main(argc - 1, argv + 1, COMMANDS);
  if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
    printf("gpuscale %s (commit %s)\n", GPUSCALE_VERSION, GPUSCALE_REVISION);
    return 0;
  }
  if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
    usage(stdout);
    return 0;
  }
  fprintf(stderr, "gpuscale: unknown command \"%s\"\n\n", cmd);
  usage(stderr);
  return 2;
}
