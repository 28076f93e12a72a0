/* `gpuscale simulate --tune`: a grid search over the knobs of a ScaledObject that KEDA and the HPA
 * own (every trigger's target, the scale-down stabilization window, the scale-up policy,
 * pollingInterval, minReplicaCount) for the fewest GPU-hours that meet a served goal and a
 * latency goal, the Pareto front of GPU-hours against served, and the tuned ScaledObject written
 * back into the user's file, changing only those keys. */
#ifndef GS_SIM_TUNE_H
#define GS_SIM_TUNE_H

#include <stdbool.h>
#include <stdio.h>

#include "sim/engine.h"

/* One configuration: the knobs, and what it did. */
struct sim_knobs {
  double factor;    /* every trigger's target x factor */
  int down_s;       /* scale-down stabilizationWindowSeconds */
  int up_pods;      /* scale-up policy: Pods per 15 s (with 100 Percent, whichever is larger) */
  int polling_s;    /* pollingInterval */
  int min_replicas; /* minReplicaCount */
  /* with several triggers, trigger i's target x factor x each[i] (0 stands for 1) */
  double each[SIM_MAX_TRIGGERS];
};
struct sim_candidate {
  struct sim_knobs k;
  double gpu_hours, served, p95_s, ratio;
  double worst_served; /* the least served of the whole and of each part (SIM_TUNE_PARTS) */
  /* with an SLO: the share of requests within it (0..1), and the least of the whole and parts */
  double attainment, worst_attainment;
  bool feasible;   /* every goal met on the whole and on each part */
  bool front;      /* on the Pareto front (no other has fewer GPU-hours and more served, or more
                      attainment with an SLO) */
  char missed[64]; /* the first goal it missed, and where ("SLO 97.1 % on part 2/3") */
};

/* The trace is also replayed in this many parts, each from a warm start, and a configuration
 * meets the served goal only if it does on the whole and on every part. */
#define SIM_TUNE_PARTS 3

struct sim_tune_goal {
  double served;     /* share, 0..1 */
  double latency_s;  /* p95 time to first token (or queueing delay); 0: no goal */
  bool slo;          /* the model's SLO: attainment (its percent) replaces the served goal */
  double attainment; /* share, 0..1 */
};

struct sim_tune {
  struct sim_candidate *c;
  size_t n;
  long best; /* index of the cheapest feasible, -1 when none */
};

/* Applies knobs to a copy of base (so; the copy shares base's strings; targets written into
 * bufs, SIM_MAX_TRIGGERS x 32 bytes). Returns 0 or GS_EINVAL (a trigger's target not found). */
int sim_tune_apply(const struct sim_scaledobject *base, const struct sim_knobs *k,
                   const struct profile_set *ps, struct sim_scaledobject *so, char bufs[][32],
                   char *err, size_t errlen);

/* Runs the grid on trace tr. progress(ud, done) about every run. Returns 0 with *out (free with
 * sim_tune_free) or a GS_E* code with err. */
int sim_tune_run(const struct sim_model *m, const struct sim_scaledobject *base,
                 const struct sim_trace *tr, const struct profile_set *ps,
                 const struct sim_params *prm, const struct sim_tune_goal *goal,
                 sim_progress_fn progress, void *pud, struct sim_tune *out, char *err,
                 size_t errlen);
void sim_tune_free(struct sim_tune *t);

/* The table: the front, then the chosen configuration. */
void sim_tune_report(FILE *f, const struct sim_tune *t, const struct sim_tune_goal *goal);
/* The Pareto front as an SVG scatter (GPU-hours against served, or SLO attainment with an SLO),
 * with the goal drawn. Returns 0 or GS_EIO. */
int sim_tune_svg(const char *path, const struct sim_tune *t, const struct sim_tune_goal *goal,
                 char *err, size_t errlen);

/* Writes the tuned ScaledObject: the text of `file` with only the tuned keys changed or added.
 * Returns 0, GS_EIO or GS_EINVAL (a flow-style mapping where a key must be added). */
int sim_tune_write(const char *file, const char *out, const struct sim_scaledobject *base,
                   const struct sim_knobs *k, const struct profile_set *ps, char *err,
                   size_t errlen);

#endif
