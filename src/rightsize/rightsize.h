/* `gpuscale rightsize`: read GPU history from Prometheus, analyse, recommend, price, report. */
#ifndef GS_RS_RIGHTSIZE_H
#define GS_RS_RIGHTSIZE_H

#include <stdint.h>

#include "rightsize/model.h"
#include "rightsize/prom.h"

/* Entry point; argv[0] is "rightsize". Returns the process exit status: 0 on success, 1 when
 * Prometheus, the price file or the output failed (the message names the problem), 2 for bad
 * flags. */
int rightsize_main(int argc, char **argv);

/* Fetches [end_ms - params.window_ms, end_ms] from Prometheus and builds a complete report
 * (analysis, prices, recommendations, summary) into r, which the caller rs_report_init'ed and
 * frees. prices_path may be NULL (built-in table). For --apply's re-check as well as the
 * command. Returns 0 or a GS_E* code with err naming the problem. */
int rs_build_report(const struct rs_prom_opts *po, const struct rs_params *params, int64_t end_ms,
                    const char *prices_path, const struct rs_progress *progress,
                    struct rs_report *r, char *err, size_t errlen);

#endif
