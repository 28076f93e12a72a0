/* `gpuscale simulate --calibrate` and `--replay-bench`: the step-time engine model fitted to, and
 * compared with, `vllm bench serve --save-result` files. */
#ifndef GS_SIM_CALIBRATE_H
#define GS_SIM_CALIBRATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Fits the engine block to the n files (starting from model_path's engine block when not NULL),
 * prints measured against fitted per file and, with out_path, writes a model file. Returns 0 or a
 * GS_E* code with err filled (a bad file: GS_EPARSE / GS_EINVAL / GS_ETOOBIG / GS_EIO). */
int sim_calibrate(const char *const *files, size_t n, const char *model_path, const char *out_path,
                  bool json, uint64_t seed, char *err, size_t errlen);
/* Replays one result file on model_path's engine block and prints model and measurement. */
int sim_replay_bench(const char *model_path, const char *bench_path, bool json, uint64_t seed,
                     char *err, size_t errlen);

#endif
