/* GPU catalogue and prices for rightsize: model names, memory, relative compute, $/hour, and the
 * report's cost figures (window cost, idle cost, monthly savings). */
#ifndef GS_RS_COST_H
#define GS_RS_COST_H

#include <stdbool.h>
#include <stddef.h>

#include "rightsize/model.h"

/* What rightsize knows of a GPU model. */
struct rs_gpu_spec {
  const char *key;       /* normalised family, "H100-80GB" */
  double mem_mib;        /* framebuffer as reported by FB_USED + FB_FREE (approximate) */
  double compute_factor; /* dense FP16 tensor throughput relative to H100 SXM (1.0) */
  bool mig;              /* supports MIG (profiles in recommend.c) */
  bool amd;              /* AMD Instinct (ROCm): a workload moves only within its vendor */
};

/* Normalises a modelName label ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB", "Tesla T4",
 * "NVIDIA L4", "NVIDIA H200") to a family key written into out ("" when unknown). */
void rs_model_key(const char *model_name, char *out, size_t outlen);
/* The spec of a family key, or NULL. */
const struct rs_gpu_spec *rs_gpu_spec_find(const char *key);

struct rs_prices;

/* The built-in example table (AWS us-east-1 on-demand, Karpenter's generated list, 2026). NULL on
 * ENOMEM. Free with rs_prices_free. */
struct rs_prices *rs_prices_builtin(void);
/* Loads a price file (YAML, see docs/rightsize.md) on top of the built-in table. Returns 0,
 * GS_EIO (unreadable; err names the file), GS_EPARSE (err names the line), GS_EINVAL (a bad
 * price; err names the key) or GS_ENOMEM. */
int rs_prices_load(const char *path, struct rs_prices **out, char *err, size_t errlen);
/* Same, from a string (tests, fuzzing). */
int rs_prices_parse(const char *text, size_t len, struct rs_prices **out, char *err, size_t errlen);
/* rs_prices_free(NULL) is fine. */
void rs_prices_free(struct rs_prices *p);
/* Prices one GPU of model `key` / `model_name` on `node`: the file's nodes: map (node ->
 * instance type), then its models:, then its instances: by model, then the built-in instances
 * by model. Returns 0, or GS_ENOTFOUND with out->source = RS_PRICE_NONE. */
int rs_price_lookup(const struct rs_prices *p, const char *node, const char *key,
                    const char *model_name, struct rs_price *out);
/* The $/GPU-hour of a family (for "cheaper model" savings), or GS_ENOTFOUND. */
int rs_price_of_model(const struct rs_prices *p, const char *key, double *per_gpu_hour);
/* The currency named by the file ("USD" by default). */
const char *rs_prices_currency(const struct rs_prices *p);

/* Prices every GPU and node of r and fills their cost fields (RS_HAS_COST). */
void rs_cost_apply(struct rs_report *r, const struct rs_prices *p);
/* Fills r->summary from GPUs, nodes and recommendations (call after recommending). */
void rs_cost_summarize(struct rs_report *r);

#endif
