/* What `gpuscale simulate` writes: the summary (text or JSON), the timeline (CSV or JSON), the
 * SVG chart (the project's SVG writer) and the --compare table. */
#ifndef GS_SIM_REPORT_H
#define GS_SIM_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "sim/engine.h"

struct sim_price {
  bool has;            /* false: the model is not in the price table; cost is absent, never 0 */
  double per_gpu_hour; /* currency per GPU-hour */
  char currency[16];
  char key[64]; /* the family priced, "H100-80GB" */
};

struct sim_run_info {
  const char *config;  /* the ScaledObject file */
  const char *so_name; /* its metadata.name */
  const char *trace;
  const char *model;
  struct sim_price price;
  const char *trace_format; /* what the trace file was read as; NULL when not known */
};

void sim_report_text(FILE *f, const struct sim_run_info *ri, const struct sim_result *r);
void sim_report_json(FILE *f, const struct sim_run_info *ri, const struct sim_result *r);
/* The --compare table: one row per run, sorted as given. */
void sim_report_compare(FILE *f, const struct sim_run_info *ri, const struct sim_result *r,
                        size_t n, bool json);
/* Writes the timeline sampled every step_s seconds: JSON when path ends in .json, else CSV.
 * Returns 0 or GS_EIO with err naming the file. */
int sim_timeline_write(const char *path, const struct sim_result *r, int64_t step_s, char *err,
                       size_t errlen);
/* Writes one SVG file: demand against capacity, and replicas against the floor. */
int sim_svg_write(const char *path, const struct sim_run_info *ri, const struct sim_result *r,
                  char *err, size_t errlen);

#endif
