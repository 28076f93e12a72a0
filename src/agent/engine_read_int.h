/* Helpers shared by the engine readers (engine_read.c: gauges and Triton; engine_llm.c: vLLM's
 * and SGLang's windowed readings). Internal to src/agent. */
#ifndef GS_ENGINE_READ_INT_H
#define GS_ENGINE_READ_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/engine_read.h"

/* Appends a "; "-separated reason to out->reason; once it is full, later reasons are dropped. */
void engine_read_reason(struct engine_reading *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Sets signal s to v, or leaves it absent with a reason when v is negative or not finite. */
void engine_read_set(struct engine_reading *out, enum engine_signal s, double v);
/* A 64-bit hash of a sample's name and labels, leaving out the labels named in skip (NULL-ended;
 * skip may be NULL). */
uint64_t engine_series_key(const struct prom_sample *s, const char *const *skip);
/* qsort/bsearch order of struct engine_series_prev by key. */
int engine_prev_cmp(const void *a, const void *b);
/* The increase of one counter series (by key) since prev, as Prometheus' rate() takes it (a value
 * below the previous one restarted from 0; a series not in prev is new, unless prev was full).
 * Records v into next. Returns false when the increase is unknown. */
bool engine_prev_increase(const struct engine_prev *prev, struct engine_prev *next, uint64_t key,
                          double v, double *inc);
/* vLLM's and SGLang's windowed readings (latency, prompt tokens) into out, against prev, which
 * becomes this scrape. out's gauges are read before. */
void engine_read_llm(const struct prom_doc *d, int64_t now_ms, struct engine_prev *prev,
                     struct engine_reading *out);
/* Triton's time to first response (nv_inference_first_response_histogram_ms) into out's
 * triton_ttft_seconds, against prev, its series recorded into next (read_triton's pair). busy:
 * requests pending (1), none (0), unknown (-1). Returns false when the page does not serve it
 * (Triton started without --metrics-config histogram_latencies=true). */
bool engine_read_triton_ttft(const struct prom_doc *d, int busy, const struct engine_prev *prev,
                             struct engine_prev *next, struct engine_reading *out);

#endif
