/* The rightsize data model: analysed GPUs, nodes and workloads, recommendations, costs, summary.
 *
 * Everything `gpuscale rightsize` knows after analysis lives in one struct rs_report, which the
 * text, JSON and HTML reports and the --apply drain read (never write). Conventions:
 *  - Numbers that were not measured are absent, never 0: each struct with optional numbers has a
 *    `valid` bitmask (RS_HAS_*), and a writer skips a field whose bit is clear.
 *  - Times are Unix milliseconds (UTC); durations are milliseconds; hours are double.
 *  - Utilisation is in percent (0..100), memory in MiB (dcgm-exporter's FB_* unit), power in W.
 *  - Money is US dollars (or whatever the price file uses; `currency` says which).
 *  - Arrays are owned by the report and freed by rs_report_free; cross references are indices
 *    into the report's arrays (size_t), so nothing points across allocations.
 */
#ifndef GS_RS_MODEL_H
#define GS_RS_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RS_NAME_MAX 256       /* node, pod, namespace, owner names (Kubernetes allows 253) */
#define RS_SHORT_MAX 64       /* GPU index, model name, MIG profile, instance type */
#define RS_TEXT_MAX 512       /* a recommendation's reason or evidence sentence */
#define RS_TIMELINE_MAX 336   /* at most this many time buckets per GPU/node (2 per hour over 7d) */
#define RS_TIMELINE_GPUS 1000 /* GPUs with a timeline: the report's first (the heatmap's rows) */
#define RS_GAPS_MAX 16        /* gaps kept per GPU/node; later ones only count in n_gaps/gap_ms */
#define RS_HOURS_PER_MONTH 730.0          /* savings per month = $/h x 730 (AWS's convention) */
#define RS_SCHEMA "gpuscale.rightsize/v1" /* JSON schema id written by report_json */

struct rs_hist;   /* rightsize/hist.h */
struct rs_strblk; /* model.c: a block of the report's string store */

/* ---- distributions ---------------------------------------------------------------------- */

/* Bits of rs_dist.valid. */
enum {
  RS_HAS_P50 = 1u << 0,
  RS_HAS_P95 = 1u << 1,
  RS_HAS_MAX = 1u << 2,
  RS_HAS_MEAN = 1u << 3,
};

/* Summary of one quantity over time (utilisation %, memory MiB, memory %, or power W): p50, p95
 * and mean over the step means, max the largest step maximum (n counts steps).
 * Quantiles come from fixed-bin histograms, so p50/p95 are the upper edge of their bin (a
 * conservative over-estimate by at most one bin width: 0.5 % for utilisation, 64 MiB for memory,
 * 5 W for power); max and mean are exact. With n == 0 every bit is clear. */
struct rs_dist {
  unsigned valid; /* RS_HAS_* */
  uint64_t n;     /* samples that went into it */
  double p50;
  double p95;
  double max;
  double mean;
};

/* ---- gaps and timelines ----------------------------------------------------------------- */

/* A run of missing samples: one or more steps with no utilisation reading, [start, end).
 * Leading/trailing absence (a GPU that appeared late or vanished early) is reported as a gap too.
 * A gap is never idle time and never busy time: it is unknown. */
struct rs_gap {
  int64_t start_ms; /* first missing step */
  int64_t end_ms;   /* first step with data again (or the window end) */
};

/* One time bucket of a timeline; the report's buckets all have width report.bucket_ms and bucket i
 * starts at report.window.start_ms + i * bucket_ms. n == 0 means no data (a gap): the other fields
 * are then meaningless and must not be drawn. mem fields also need RS_BKT_MEM in valid. */
enum {
  RS_BKT_UTIL = 1u << 0,
  RS_BKT_MEM = 1u << 1,
  RS_BKT_MEM_PCT = 1u << 2, /* memory total was known (FB_USED + FB_FREE) */
};
struct rs_bucket {
  uint16_t n;         /* utilisation samples in the bucket (0: no data) */
  uint8_t valid;      /* RS_BKT_* */
  uint8_t idle_pct;   /* share of this bucket's samples that were idle, 0..100 */
  float util_mean;    /* % */
  float mem_mean_mib; /* MiB */
  float mem_mean_pct; /* % of the GPU's framebuffer */
};

/* ---- prices ------------------------------------------------------------------------------ */

/* Where a price came from. */
enum rs_price_source {
  RS_PRICE_NONE = 0,      /* no price known: every cost of this GPU/node is absent */
  RS_PRICE_FILE_MODEL,    /* --prices file, keyed by GPU model */
  RS_PRICE_FILE_INSTANCE, /* --prices file, keyed by instance type */
  RS_PRICE_BUILTIN,       /* built-in example table (AWS us-east-1 on-demand, 2026) */
};

/* A per-GPU price and its provenance. */
struct rs_price {
  enum rs_price_source source;
  double per_gpu_hour;              /* $/GPU-hour; meaningful unless source == RS_PRICE_NONE */
  char instance_type[RS_SHORT_MAX]; /* e.g. "p5.48xlarge"; "" when priced by model only */
  unsigned gpus_per_instance;       /* 8 for p5.48xlarge; 0 when unknown */
};

/* ---- GPUs --------------------------------------------------------------------------------- */

/* Bits of rs_gpu.valid / rs_node.valid / rs_workload.valid for optional scalar fields. */
enum {
  RS_HAS_MEM_TOTAL = 1u << 0,  /* mem_total_mib known: max of FB_USED + FB_FREE, else the
                                  catalogue's size for the model (cost.c) */
  RS_HAS_IDLE = 1u << 1,       /* idle_fraction and idle_hours known (needs utilisation data) */
  RS_HAS_USED_HOURS = 1u << 2, /* used_gpu_hours known */
  RS_HAS_COST = 1u << 3,       /* cost_window and idle_cost_window known (needs a price) */
  RS_HAS_STREAK = 1u << 4,     /* idle_streak_ms known (data reaches the window end) */
};

/* One GPU, or one MIG instance, as seen in Prometheus, keyed by node + UUID (or node + gpu index
 * when the UUID label is missing) + GPU_I_ID. dcgm-exporter gives MIG instances their parent's
 * UUID, so the instance id is part of the key: an instance is never merged into its parent or into
 * another instance. Every series that names the same key counts once per step, however many scrape
 * jobs or per-pod copies carry it (the largest value of the step wins). */
struct rs_gpu {
  /* Names: strings of the report's string store (rs_report_str), or of the caller when it built
   * the report itself; never NULL. At most RS_NAME_MAX - 1 / RS_SHORT_MAX - 1 bytes, as before. */
  const char *node;          /* Hostname, or node / kubernetes_node when present */
  const char *gpu;           /* the `gpu` label (index as text) */
  const char *uuid;          /* the `UUID` label; "" when absent */
  const char *gpu_i_id;      /* MIG instance id (GPU_I_ID); "" for a whole GPU */
  const char *gpu_i_profile; /* MIG profile (GPU_I_PROFILE), e.g. "1g.10gb"; or "" */
  bool mig_parent;       /* a whole-GPU row whose MIG instances are listed too: its memory already
                            holds theirs, so node pools skip it; it alone carries the card's cost */
  bool mig_has_parent;   /* an instance row whose parent row is listed: no cost of its own (the card
                            is paid once, on the parent), left out of the summary's GPU counts */
  const char *model;     /* `modelName`, e.g. "NVIDIA H100 80GB HBM3"; "" when absent */
  const char *model_key; /* normalised family: "H100-80GB", "A100-40GB", "L4"... or "" */
  size_t node_idx;       /* index into rs_report.nodes */
  unsigned valid;        /* RS_HAS_MEM_TOTAL ... */

  int64_t first_ms, last_ms; /* first and last sample time seen (any metric) */
  double hours_observed;     /* samples x step, utilisation series (time with data) */
  double hours_span;         /* last - first + step: time the GPU existed, gaps included */
  double coverage;           /* hours_observed / window hours, 0..1 */

  struct rs_dist util;    /* DCGM_FI_DEV_GPU_UTIL, % */
  struct rs_dist mem_mib; /* DCGM_FI_DEV_FB_USED, MiB */
  struct rs_dist mem_pct; /* FB_USED / (FB_USED + FB_FREE), %; needs FB_FREE */
  struct rs_dist power_w; /* DCGM_FI_DEV_POWER_USAGE, W */
  double mem_total_mib;   /* RS_HAS_MEM_TOTAL */

  double idle_fraction;  /* idle samples / samples with utilisation, 0..1 (RS_HAS_IDLE) */
  double idle_hours;     /* idle samples x step (RS_HAS_IDLE) */
  double used_gpu_hours; /* sum(util/100 x step) in hours: util-weighted use (RS_HAS_USED_HOURS) */
  int64_t
      idle_streak_ms; /* continuous idle time ending at the window end, no gap (RS_HAS_STREAK) */

  size_t n_gaps;       /* all gaps found, possibly > RS_GAPS_MAX */
  int64_t gap_ms;      /* total time in gaps inside [first, last] and at the ends */
  struct rs_gap *gaps; /* the first min(n_gaps, RS_GAPS_MAX) (owned); NULL when none */

  size_t *workloads; /* indices into rs_report.workloads seen on this GPU (owned) */
  size_t n_workloads;

  struct rs_price price;   /* per-GPU price */
  double cost_window;      /* hours_span x price (RS_HAS_COST) */
  double idle_cost_window; /* idle_hours x price (RS_HAS_COST) */

  struct rs_bucket *timeline; /* rs_report.n_buckets entries (owned); NULL from the
                                 RS_TIMELINE_GPUS-th GPU of the report on (no picture draws it) */
};

/* ---- nodes -------------------------------------------------------------------------------- */

/* A node: the GPUs that share a Hostname/node label. */
struct rs_node {
  char name[RS_NAME_MAX];
  char model[RS_SHORT_MAX];     /* model of its GPUs; "mixed" when they differ */
  char model_key[RS_SHORT_MAX]; /* normalised family, or "" */
  size_t *gpus;                 /* indices into rs_report.gpus (owned) */
  size_t n_gpus;
  unsigned valid; /* RS_HAS_IDLE, RS_HAS_USED_HOURS, RS_HAS_COST, RS_HAS_STREAK */

  int64_t first_ms, last_ms;
  double hours_observed;  /* max over its GPUs */
  double coverage;        /* min over its GPUs */
  struct rs_dist util;    /* all samples of all its GPUs pooled, % */
  struct rs_dist mem_mib; /* all samples of all its GPUs pooled, MiB per GPU */

  double idle_fraction;  /* share of steps with data where every GPU was idle (RS_HAS_IDLE) */
  double used_gpu_hours; /* sum over GPUs (RS_HAS_USED_HOURS) */
  int64_t
      idle_streak_ms; /* min over its GPUs: how long the whole node has been idle (RS_HAS_STREAK) */

  size_t n_gaps; /* union over GPUs, counted per GPU */
  int64_t gap_ms;

  struct rs_price price;   /* per GPU; node price per hour = per_gpu_hour x n_gpus */
  double cost_window;      /* sum over GPUs (RS_HAS_COST) */
  double idle_cost_window; /* sum over GPUs (RS_HAS_COST) */

  struct rs_bucket *timeline; /* mean over its GPUs per bucket (owned) */
};

/* ---- workloads ---------------------------------------------------------------------------- */

/* How the owner name was found. */
enum rs_owner_source {
  RS_OWNER_POD = 0,   /* no suffix recognised: owner = pod name */
  RS_OWNER_HEURISTIC, /* pod name with a ReplicaSet ("-<hash>-<5>") or StatefulSet ("-N") suffix
                         stripped; a guess, because the Kubernetes API was not asked */
  RS_OWNER_KUBE,      /* read from the pod's ownerReferences through the Kubernetes API */
};

/* A workload: one pod (namespace + pod) that held GPUs. The exported_* labels win over the plain
 * ones. Utilisation and memory are per GPU held (samples of all its GPUs pooled), which is what
 * sharing and packing need. */
struct rs_workload {
  /* Names: as rs_gpu's (the report's string store; never NULL; < RS_NAME_MAX bytes). */
  const char *namespace_;
  const char *pod;
  const char *container; /* "" when absent or more than one */
  const char *owner;
  enum rs_owner_source owner_source;
  unsigned valid; /* RS_HAS_IDLE, RS_HAS_USED_HOURS */

  size_t *gpus; /* indices into rs_report.gpus (owned) */
  size_t n_gpus;
  size_t n_nodes; /* distinct nodes among its GPUs */

  int64_t first_ms, last_ms;
  double hours_observed;  /* max over its GPUs */
  struct rs_dist util;    /* % per GPU */
  struct rs_dist mem_mib; /* MiB per GPU */
  double idle_fraction;
  double used_gpu_hours;
  /* Step maxima of utilisation (max_over_time per step, per GPU held): the analyser's histogram of
   * RS_PEAK_BINS bins of RS_PEAK_W % each, handed over whole (owned; NULL when none). The burst
   * tests of MIG and time-slicing read it through rs_workload_peak_share. */
  struct rs_hist *util_peaks;
  uint64_t n_util_peaks;
};

#define RS_PEAK_BINS 1001 /* 0.1 % bins, 0..100 % (the last also holds anything above) */
#define RS_PEAK_W 0.1

/* Share (0..1) of w's steps whose maximum utilisation was above pct, counting a 0.1 % bin when
 * its lower edge is above pct (exact for DCGM's integer percent). NaN when w has no step maxima. */
double rs_workload_peak_share(const struct rs_workload *w, double pct);

/* ---- recommendations ---------------------------------------------------------------------- */

enum rs_rec_kind {
  RS_REC_IDLE_NODE = 0, /* (a) drain the node; the autoscaler removes it */
  RS_REC_CONSOLIDATE,   /* (b) pack low-use workloads onto fewer GPUs/nodes */
  RS_REC_MIG,           /* (c) move the workload onto a MIG slice */
  RS_REC_TIMESLICE,     /* (c) share the GPU by time-slicing (no MIG profile fits or no MIG) */
  RS_REC_CHEAPER_GPU,   /* (d) a cheaper GPU model fits */
  RS_REC_WATCH_NODE,    /* (a') idle up to the window end, but below the drain floors (confidence
                           or idle share): watch it; --apply never acts on it, no savings */
  RS_REC_KIND_COUNT
};

enum rs_confidence { RS_CONF_LOW = 0, RS_CONF_MEDIUM, RS_CONF_HIGH };

/* Bits of rs_evidence.valid. */
enum {
  RS_EV_UTIL_P95 = 1u << 0,
  RS_EV_MEM_P95 = 1u << 1,
  RS_EV_IDLE_FRACTION = 1u << 2,
  RS_EV_IDLE_STREAK = 1u << 3,
  RS_EV_HOURS = 1u << 4,
  RS_EV_COVERAGE = 1u << 5,
  RS_EV_UTIL_MAX = 1u << 6,
  RS_EV_MEM_MAX = 1u << 7,
  RS_EV_BURST = 1u << 8, /* burst_share and burst_limit_pct known (MIG, time-slicing) */
};

/* The numbers a recommendation rests on (for the subject: node, workload or group). */
struct rs_evidence {
  unsigned valid;         /* RS_EV_* */
  double util_p95;        /* % */
  double util_max;        /* % */
  double mem_p95_mib;     /* MiB */
  double mem_max_mib;     /* MiB */
  double idle_fraction;   /* 0..1 */
  int64_t idle_streak_ms; /* continuous idle time up to the window end */
  double hours_observed;
  double coverage; /* hours observed / window, 0..1 */
  size_t n_gaps;
  double burst_limit_pct; /* the target's compute share: 100 x n/7 for a MIG slice, 100/ways */
  double burst_share;     /* share of steps whose max utilisation was above it, 0..1 */
};

/* Where a MIG or time-slicing packing puts one GPU's worth of a workload: the card (0-based within
 * the packing group) and, for MIG, the first memory slice of its instance. */
struct rs_pack_slot {
  size_t card;
  unsigned start;      /* MIG: memory slice the instance starts at; 0 for time-slicing */
  unsigned mem_slices; /* MIG: memory slices it occupies; 0 for time-slicing */
};

/* Bits of rs_rec.valid. */
enum {
  RS_REC_HAS_SAVINGS = 1u << 0, /* savings_month known (needs prices) */
};

struct rs_rec {
  enum rs_rec_kind kind;
  unsigned valid; /* RS_REC_HAS_* */

  /* Subject. IDLE_NODE: node_idx. MIG/TIMESLICE/CHEAPER_GPU: workload_idx. CONSOLIDATE: the
   * workloads moved (workloads[]), the nodes freed (nodes[]) and the GPUs freed (gpus[]). */
  size_t node_idx;
  size_t workload_idx;
  size_t *workloads; /* owned, may be NULL */
  size_t n_workloads;
  size_t *nodes; /* owned, may be NULL; for IDLE_NODE also holds node_idx */
  size_t n_nodes;
  size_t *gpus; /* owned, may be NULL: GPUs freed (CONSOLIDATE, IDLE_NODE) */
  size_t n_gpus;

  /* Kind-specific target. */
  char mig_profile[RS_SHORT_MAX];  /* MIG: "1g.10gb"; "" otherwise */
  unsigned mig_compute_sevenths;   /* MIG: compute share in sevenths of the GPU (1, 2, 3, 4, 7) */
  double mig_mem_gb;               /* MIG: the slice's memory in GB */
  unsigned share_ways;             /* MIG/TIMESLICE: how many such workloads fit on one GPU */
  char target_model[RS_SHORT_MAX]; /* CHEAPER_GPU: "L4", "T4" */
  size_t gpus_before, gpus_after;  /* CONSOLIDATE: GPUs in use before and after packing */

  /* MIG/TIMESLICE: the packing of every such recommendation of one group (GPUs of one model at
   * one price) onto cards. savings_month = pack_gpus_freed x the GPU's price x 730. */
  char pack_group[RS_SHORT_MAX]; /* "H100-80GB" (with the price when one model has several) */
  size_t pack_gpus_before;       /* the group's GPUs held by the packed workloads */
  size_t pack_gpus_after;        /* cards the packing uses */
  double pack_gpus_freed; /* this workload's share of before - after: on a card with m slices, each
                             slice frees (m - 1)/m of a GPU; 0 when it sits alone */
  bool pack_shared;       /* some slice shares a card: the savings need the mates to move too */
  struct rs_pack_slot *slots; /* one per GPU held (owned) */
  size_t n_slots;
  size_t *mates; /* workload indices sharing one of its cards (owned) */
  size_t n_mates;

  char reason[RS_TEXT_MAX];        /* one sentence: why, for humans */
  char evidence_text[RS_TEXT_MAX]; /* the numbers as a sentence */
  struct rs_evidence evidence;

  double savings_month;                /* $/month at RS_HOURS_PER_MONTH (RS_REC_HAS_SAVINGS) */
  double confidence;                   /* 0..1, from coverage, gaps and hours observed vs window */
  enum rs_confidence confidence_level; /* high >= 0.8, medium >= 0.5, else low */
};

/* ---- parameters and summary --------------------------------------------------------------- */

/* The thresholds the analysis ran with (echoed in every report). */
struct rs_params {
  int64_t window_ms;    /* --window, default 7d */
  int64_t step_ms;      /* --step, default 5m */
  int64_t min_idle_ms;  /* --min-idle, default 2h */
  double idle_util_pct; /* --idle-util: a step is idle when its max util <= this (default 5) */
  double idle_mem_pct;  /* --idle-mem: ... and its max memory used <= this % of the GPU (default
                           5); when the total is unknown, only utilisation decides */
  double low_util_pct;  /* --low-util: a workload is low-use when p95 util <= this (default 30) */
  double pack_util_pct; /* --pack-util: packing target per GPU for summed p95 util (default 80) */
  double pack_mem_pct;  /* --pack-mem: packing target per GPU for summed p95 memory (default 90) */
  double min_coverage;  /* --min-coverage: below this no recommendation is made (default 0.5) */
  double burst_tolerance; /* --burst-tolerance: share of steps whose max utilisation may exceed a
                             MIG slice's or time-slice's compute share (default 0.01) */
  double drain_min_confidence; /* --drain-min-confidence: below it an idle node is "watch"
                                  (default 0.15) */
  double drain_min_idle_share; /* --drain-min-idle-share: idle share of the window below which an
                                  idle node is "watch" (default 0.5) */
};

/* Bits of rs_summary.valid. */
enum {
  RS_SUM_HAS_COST = 1u << 0,    /* cost_window, idle_cost_window known (some GPU priced) */
  RS_SUM_HAS_SAVINGS = 1u << 1, /* savings_month* known */
};

/* The report's opening summary. */
struct rs_summary {
  unsigned valid;
  size_t n_nodes, n_gpus, n_workloads, n_recs;
  size_t n_gpus_unpriced;    /* GPUs with no price: excluded from every $ figure */
  double gpu_hours_paid;     /* sum of hours_span: the time each GPU existed, gaps included */
  double gpu_hours_observed; /* sum of hours_observed */
  double gpu_hours_used;     /* sum of util-weighted hours: sum(util/100 x step) */
  double gpu_hours_idle;     /* sum of idle samples x step */
  double cost_window;        /* $ paid over the window (priced GPUs) */
  double idle_cost_window;   /* $ of idle GPU-hours over the window */
  double cost_month;         /* cost_window scaled to RS_HOURS_PER_MONTH */
  double idle_cost_month;    /* idle_cost_window scaled likewise */
  double savings_month;      /* sum over kinds; overlapping recommendations counted once per GPU */
  double savings_month_by_kind[RS_REC_KIND_COUNT];
  size_t recs_by_kind[RS_REC_KIND_COUNT];
};

/* A note for the reader ("owner names are guessed from pod names", "no FB_FREE series: memory
 * percent unknown", "chunk 3 of 7 came back empty"). */
struct rs_note {
  char text[RS_TEXT_MAX];
};

/* The whole analysis. */
struct rs_report {
  char schema[RS_SHORT_MAX];      /* RS_SCHEMA */
  char source_url[RS_TEXT_MAX];   /* the Prometheus base URL (no credentials) */
  char currency[8];               /* "USD" */
  char price_source[RS_TEXT_MAX]; /* "built-in (AWS us-east-1 on-demand, 2026; examples)" or path */
  int64_t generated_ms;           /* when the report was made */
  int64_t start_ms, end_ms;       /* the analysed window [start, end] */
  struct rs_params params;

  size_t n_buckets;  /* timeline length for every GPU and node, <= RS_TIMELINE_MAX */
  int64_t bucket_ms; /* width of one timeline bucket */

  struct rs_gpu *gpus; /* sorted by node, then gpu index */
  size_t n_gpus;
  struct rs_node *nodes; /* sorted by name */
  size_t n_nodes;
  struct rs_workload *workloads; /* sorted by namespace, pod */
  size_t n_workloads;
  struct rs_rec *recs; /* sorted by kind, then savings descending */
  size_t n_recs;
  struct rs_note *notes;
  size_t n_notes;

  struct rs_summary summary;

  /* The names of gpus[] and workloads[], each of its own length, in blocks freed whole by
   * rs_report_free (owned). A fixed 256-byte field per name cost 15 MiB at 10 000 GPUs. */
  struct rs_strblk *strs;
};

/* Initialises an empty report (schema, currency "USD", default params). */
void rs_report_init(struct rs_report *r);
/* Frees every array the report owns and leaves it empty. rs_report_free(NULL) is fine. */
void rs_report_free(struct rs_report *r);
/* A copy of s (at most max - 1 bytes of it, as snprintf into a char[max] would keep) in r's
 * string store, alive until rs_report_free; "" is not copied. NULL when out of memory. */
const char *rs_report_str(struct rs_report *r, const char *s, size_t max);
/* Appends a printf-formatted note. Returns 0 or GS_ENOMEM. */
int rs_report_note(struct rs_report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Fills defaults into p: 7d window, 5m step, 2h min-idle, 5 % util, 5 % memory, 30 % low-use,
 * 80 % / 90 % packing targets, 0.5 minimum coverage, 1 % burst tolerance, drain floors 0.15
 * (confidence) and 0.5 (idle share). */
void rs_params_default(struct rs_params *p);

/* Stable lower-case names used by the reports and the JSON schema. */
const char *rs_rec_kind_name(enum rs_rec_kind k);         /* "idle_node", "consolidate", "mig",
                                                            "timeslice", "cheaper_gpu",
                                                            "watch_node" */
const char *rs_confidence_name(enum rs_confidence c);     /* "low", "medium", "high" */
const char *rs_owner_source_name(enum rs_owner_source s); /* "pod", "heuristic", "kubernetes" */
const char *rs_price_source_name(enum rs_price_source s); /* "none", "file:model",
                                                            "file:instance", "builtin" */
/* Maps a confidence score 0..1 to its level. */
enum rs_confidence rs_confidence_level(double score);

#endif
