/* Streaming analysis of GPU history: series in, per-GPU/node/workload summaries out.
 *
 * Memory is bounded by the number of GPUs and workloads, not by the window: each GPU keeps
 * fixed-bin histograms (quantiles), two bits per step (data present, busy) for gaps, idle time
 * and the idle streak, a fixed number of timeline buckets, and a scratch of one chunk's readings
 * (step means and maxima). The scratch folds every series that names the same GPU key (node,
 * UUID or index, GPU_I_ID) into one value per step, the largest, so that a second scrape job or
 * per-pod copies count once; a chunk is counted when the next one begins, or at finish. */
#ifndef GS_RS_ANALYZE_H
#define GS_RS_ANALYZE_H

#include <stddef.h>
#include <stdint.h>

#include "rightsize/model.h"
#include "rightsize/prom.h"

struct rs_analyzer;

/* A new analyser for the steps start_ms, start_ms + step, ... <= end_ms (p->step_ms). p is
 * copied. NULL on ENOMEM or a bad range. Free with rs_analyzer_free. */
struct rs_analyzer *rs_analyzer_new(const struct rs_params *p, int64_t start_ms, int64_t end_ms);
/* rs_analyzer_free(NULL) is fine. */
void rs_analyzer_free(struct rs_analyzer *a);

/* Counts the chunk before (if any) and starts one covering [start_ms, end_ms]. The series of a
 * chunk may come in any order. Without a chunk, the whole window is one. Returns 0 or GS_ENOMEM.
 * Matches struct rs_chunk_hook.begin (ud = the analyser). */
int rs_analyzer_begin_chunk(void *ud, int64_t start_ms, int64_t end_ms);

/* The analyser holds each GPU's readings of the current chunk until the chunk ends (the queries of
 * one step come one after another): at most RS_SCRATCH_BYTES for the whole fleet, counting seven
 * floats a step (six are taken unless power maxima come), so the chunks shrink as the fleet
 * grows; the first, before any GPU is known, is RS_FIRST_CHUNK_STEPS long. */
#define RS_SCRATCH_BYTES ((size_t)16 << 20)
#define RS_FIRST_CHUNK_STEPS 64
/* Each GPU's timeline (the report's pictures) has at most RS_TIMELINE_MAX buckets, counted as 32
 * bytes (RS_BUCKET_BUDGET; they take 27 or 30); when the fleet's would pass RS_TIMELINE_BYTES,
 * every bucket doubles in width (report.bucket_ms), so 10 000 GPUs get 42 buckets, 1000 GPUs the
 * full 336. */
#define RS_TIMELINE_BYTES ((size_t)16 << 20)
/* The most steps the next chunk may span. Matches struct rs_chunk_hook.max_steps. */
int64_t rs_analyzer_chunk_steps(void *ud);
/* Adds one series: s->agg says whether its values are step means, step maxima or plain samples
 * (both). Points off the step grid snap to the nearest step; points outside the window or the
 * current chunk are ignored. RS_M_TARGET rows (job, instance, namespace, pod of a scrape target)
 * are remembered for the whole run; a later series whose plain `pod` is its own target's names no
 * workload. A workload named only by a scrape target's own `pod` label otherwise (see rs_labels)
 * is dropped at finish. Returns 0 or GS_ENOMEM. Matches struct rs_sink.series. */
int rs_analyzer_add(void *ud, enum rs_metric m, const struct rs_series *s);

/* Once, at the end: hands the workloads' histograms of step maxima over to r.
 * Builds GPUs, nodes, workloads and notes into r (which must be rs_report_init'ed; params,
 * window and timeline are set here). Prices, recommendations and the summary are filled later
 * by rs_cost_apply, rs_recommend and rs_cost_summarize. Returns 0 or GS_ENOMEM. */
int rs_analyzer_finish(struct rs_analyzer *a, struct rs_report *r);

/* Fraction-of-window confidence helper shared with recommend.c: hours / window hours in 0..1. */
double rs_window_fraction(const struct rs_report *r, double hours);

#endif
