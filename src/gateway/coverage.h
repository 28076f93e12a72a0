/* The gateway's record of its last answer per ScaledObject trigger: value, coverage, error. */
#ifndef GS_COVERAGE_H
#define GS_COVERAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "keda/scaler.h"

#define COVERAGE_MAX_ENTRIES 1024 /* ScaledObject triggers remembered; the oldest is replaced */

struct coverage;

struct coverage *coverage_new(void);
void coverage_free(struct coverage *c);
/* Records one GetMetrics answer (res or e, as rpc_server_config.on_metrics passes them) and logs
 * when a trigger's coverage, partial or empty-selection state changes. Thread-safe. */
void coverage_record(void *ud, const struct scaler_request *req, const char *metric_name,
                     const struct scaler_result *res, const struct scaler_error *e);
/* Appends gpuscale_gateway_trigger_* series. Returns 0 or a buf error. */
int coverage_render(struct coverage *c, struct buf *b);

#endif
