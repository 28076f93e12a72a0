/* `gpuscale burn`: the option table, the duty-cycle loop, NVML readings beside what was asked, and
 * a clean exit that frees the GPU. */
#include "burn/burn.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "burn/gpu.h"
#include "burn/plan.h"
#include "collect/collector.h"
#include "core/config.h"
#include "core/err.h"
#include "core/log.h"
#include "core/pattern.h"

#define CALIBRATE_MS 20.0
#define MIN_KERNEL_MS 0.05 /* shorter on-times are skipped: a launch costs about this much */
#define STATUS_MS 1000.0

struct burn_opts {
  long long gpu;
  double util;
  char *memory;
  int64_t duration_ms;
  char *pattern;
  char *steps;
  char *csv;
  bool repeat;
  double sine_min;
  int64_t period_ms;
  char *follow;
  int64_t cycle_ms;
  bool closed_loop;
  char *cuda_library;
  char *nvml_library;
  char *log_level;
};

#define O(f) offsetof(struct burn_opts, f)
static const struct opt_def burn_defs[] = {
    {"gpu", 0, "GPUSCALE_BURN_GPU", OPT_INT, "0", 0, 1023, NULL, "N",
     "CUDA device ordinal to drive (as CUDA numbers them; in a pod, 0 is the pod's GPU)", O(gpu)},
    {"util", 0, "GPUSCALE_BURN_UTIL", OPT_DOUBLE, "60", 0, 100, NULL, "PCT",
     "utilisation to hold (constant pattern), or the top of a sine", O(util)},
    {"memory", 0, "GPUSCALE_BURN_MEMORY", OPT_STRING, "0", 0, 0, NULL, "SIZE",
     "GPU memory to allocate and touch: 512MiB, 4GiB, 20% (of the GPU); its peak when memory "
     "follows the pattern",
     O(memory)},
    {"duration", 0, "GPUSCALE_BURN_DURATION", OPT_DURATION, NULL, 1000, 31536000000.0, NULL,
     "DURATION", "stop after this long and exit 0 (default: run until SIGTERM or SIGINT)",
     O(duration_ms)},
    {"pattern", 0, "GPUSCALE_BURN_PATTERN", OPT_ENUM, "constant", 0, 0, "constant|step|sine|csv",
     "NAME",
     "how the load changes: constant (--util), step (--steps), sine (--sine-min..--util over "
     "--period) or csv (--csv FILE; also --pattern csv FILE)",
     O(pattern)},
    {"steps", 0, "GPUSCALE_BURN_STEPS", OPT_STRING, NULL, 0, 0, NULL, "LIST",
     "step pattern: PCT:DURATION,...,PCT, e.g. 30:2m,90:5m,0 (the last step holds)", O(steps)},
    {"csv", 0, "GPUSCALE_BURN_CSV", OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "csv pattern: seconds,percent rows, linearly interpolated", O(csv)},
    {"repeat", 0, "GPUSCALE_BURN_REPEAT", OPT_BOOL, "false", 0, 0, NULL, NULL,
     "step and csv patterns: loop (over the sum of the steps, or the last row's time)", O(repeat)},
    {"sine-min", 0, "GPUSCALE_BURN_SINE_MIN", OPT_DOUBLE, "0", 0, 100, NULL, "PCT",
     "sine pattern: the low point (the sine starts there)", O(sine_min)},
    {"period", 0, "GPUSCALE_BURN_PERIOD", OPT_DURATION, "2m", 1000, 86400000, NULL, "DURATION",
     "sine pattern: its period", O(period_ms)},
    {"follow", 0, "GPUSCALE_BURN_FOLLOW", OPT_ENUM, "util", 0, 0, "util|memory|both", "WHAT",
     "what follows the pattern; memory follows as --memory x level / the pattern's peak, and "
     "what does not follow holds --util or --memory",
     O(follow)},
    {"cycle", 0, "GPUSCALE_BURN_CYCLE", OPT_DURATION, "100ms", 20, 1000, NULL, "DURATION",
     "duty-cycle period: a kernel runs for util% of each", O(cycle_ms)},
    {"closed-loop", 0, "GPUSCALE_BURN_CLOSED_LOOP", OPT_BOOL, "false", 0, 0, NULL, NULL,
     "correct the duty cycle from the GPU's NVML utilisation (needs libnvidia-ml)", O(closed_loop)},
    {"cuda-library", 0, "GPUSCALE_CUDA_LIBRARY", OPT_STRING, NULL, 0, 0, NULL, "PATH",
     "load this CUDA driver library instead of libcuda.so.1", O(cuda_library)},
    {"nvml-library", 0, "GPUSCALE_NVML_LIBRARY", OPT_STRING, NULL, 0, 0, NULL, "PATH",
     "load this NVML library instead of libnvidia-ml.so.1", O(nvml_library)},
    {"log-level", 0, "GPUSCALE_LOG_LEVEL", OPT_ENUM, "warn", 0, 0, "debug|info|warn|error", "LEVEL",
     "log threshold (stderr)", O(log_level)},
};
#undef O
#define NDEFS (sizeof burn_defs / sizeof burn_defs[0])

static const char burn_usage[] =
    "gpuscale burn [--gpu N] [--util PCT] [--memory SIZE] [--duration D]\n"
    "                     [--pattern constant|step|sine|csv FILE] [--closed-loop]";
static const char burn_desc[] =
    "Drives one GPU to a target utilisation and memory, steady or following a pattern, to test\n"
    "autoscaling. Kernels run for util% of every --cycle (NVML's utilisation is the share of time\n"
    "a kernel ran); memory is allocated and touched up to --memory. Needs only the NVIDIA driver\n"
    "(libcuda.so.1). Prints what it asked and what NVML reads once a second. Exit status: 0 done\n"
    "or stopped by SIGTERM/SIGINT, 1 other error, 2 usage, 3 no driver, 4 no such GPU, 5 out of\n"
    "GPU memory, 6 kernel failure, 7 --closed-loop without NVML (docs/burn.md).\n\n"
    "Examples:  gpuscale burn --util 60 --duration 1m\n"
    "           gpuscale burn --pattern step --steps 30:2m,90:5m,0 --memory 8GiB --follow both";

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig) {
  stop_signal = sig;
}

static void install_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal; /* no SA_RESTART: a sleep returns early on a signal */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
}

static double mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

/* Sleeps until the monotonic time at_ms, or until a signal arrives. */
static void sleep_until(double at_ms) {
  while (!stop_signal) {
    double d = at_ms - mono_ms();
    if (d <= 0)
      return;
    struct timespec ts = {(time_t)(d / 1000.0), (long)(fmod(d, 1000.0) * 1e6)};
    if (nanosleep(&ts, NULL) != 0 && errno != EINTR)
      return;
  }
}

/* ---- the plan from the options ---- */

static int read_csv(const char *path, struct pattern *p, bool repeat, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "--csv %s: cannot open: %s", path, strerror(errno));
    return GS_EIO;
  }
  char *buf = malloc(PATTERN_CSV_MAX_BYTES + 1);
  if (!buf) {
    fclose(f);
    snprintf(err, errlen, "--csv %s: out of memory", path);
    return GS_ENOMEM;
  }
  size_t len = fread(buf, 1, PATTERN_CSV_MAX_BYTES + 1, f);
  int bad = ferror(f);
  fclose(f);
  int rc = 0;
  if (bad) {
    snprintf(err, errlen, "--csv %s: cannot read", path);
    rc = GS_EIO;
  } else {
    memset(p, 0, sizeof *p);
    p->kind = PATTERN_CSV;
    char perr[512];
    rc = pattern_csv_parse(buf, len, path, 0, 100, "a percent from 0 to 100", &p->points,
                           &p->npoints, perr, sizeof perr);
    if (rc)
      snprintf(err, errlen, "--csv: %s", perr);
  }
  free(buf);
  if (rc)
    return rc;
  pattern_range(p);
  p->period = p->points[p->npoints - 1].t;
  if (repeat && p->period <= 0) {
    snprintf(err, errlen,
             "--csv %s: --repeat needs a last row after 0 seconds (its time is the "
             "loop length)",
             path);
    free(p->points);
    p->points = NULL;
    return GS_EINVAL;
  }
  p->repeat = repeat;
  return 0;
}

static int build_plan(const struct burn_opts *o, struct burn_plan *plan, char *err, size_t errlen) {
  memset(plan, 0, sizeof *plan);
  plan->util_pct = o->util;
  plan->follow = !strcmp(o->follow, "memory") ? BURN_FOLLOW_MEMORY
                 : !strcmp(o->follow, "both") ? BURN_FOLLOW_BOTH
                                              : BURN_FOLLOW_UTIL;
  bool step = !strcmp(o->pattern, "step"), csv = !strcmp(o->pattern, "csv");
  if (o->steps && !step) {
    snprintf(err, errlen, "--steps is for --pattern step (the pattern is %s)", o->pattern);
    return GS_EINVAL;
  }
  if (o->csv && !csv) {
    snprintf(err, errlen, "--csv is for --pattern csv (the pattern is %s)", o->pattern);
    return GS_EINVAL;
  }
  if (o->repeat && !step && !csv) {
    snprintf(err, errlen, "--repeat is for --pattern step or csv (a %s pattern needs none)",
             o->pattern);
    return GS_EINVAL;
  }
  struct pattern *p = &plan->level;
  if (step)
    return burn_steps_parse(o->steps, o->repeat, p, err, errlen);
  if (csv) {
    if (!o->csv) {
      snprintf(err, errlen, "--pattern csv needs a file: --pattern csv FILE or --csv FILE");
      return GS_EINVAL;
    }
    return read_csv(o->csv, p, o->repeat, err, errlen);
  }
  if (!strcmp(o->pattern, "sine")) {
    if (o->sine_min > o->util) {
      snprintf(err, errlen, "--sine-min %g is above --util %g; allowed: --sine-min <= --util",
               o->sine_min, o->util);
      return GS_EINVAL;
    }
    p->kind = PATTERN_SINE;
    p->min = o->sine_min;
    p->max = o->util;
    p->period = (double)o->period_ms / 1000.0;
    p->phase = -p->period / 4; /* start at the low point */
    return 0;
  }
  p->kind = PATTERN_CONST;
  p->value = p->min = p->max = o->util;
  return 0;
}

/* "--pattern csv FILE" (the form) becomes "--pattern csv --csv FILE". Returns a new argv
 * (free() it; its strings are argv's) or NULL when out of memory. */
static char **rewrite_argv(int argc, char **argv, int *outc) {
  char **v = calloc((size_t)argc * 2 + 1, sizeof *v);
  if (!v)
    return NULL;
  int n = 0;
  static char csv_flag[] = "--csv";
  for (int i = 0; i < argc; i++) {
    v[n++] = argv[i];
    bool two = !strcmp(argv[i], "--pattern") && i + 1 < argc && !strcmp(argv[i + 1], "csv");
    bool one = !strcmp(argv[i], "--pattern=csv");
    int file = two ? i + 2 : i + 1;
    if (two)
      v[n++] = argv[++i];
    if ((two || one) && file < argc && argv[file][0] != '-') {
      v[n++] = csv_flag;
      v[n++] = argv[file];
      i = file;
    }
  }
  *outc = n;
  return v;
}

/* ---- NVML readings of the burned GPU ---- */

struct nvml_view {
  const struct collector_ops *ops;
  struct collector *c;
  size_t idx;
  bool ok;
  char why[640];
};

static void nvml_open_view(struct nvml_view *v, const char *lib, const char *pci) {
  memset(v, 0, sizeof *v);
  v->ops = &collector_nvml;
  struct collector_config cfg = {.nvml_library = lib};
  char err[512];
  if (v->ops->open(&cfg, &v->c, err, sizeof err) != 0) {
    snprintf(v->why, sizeof v->why, "%s", err);
    v->c = NULL;
    return;
  }
  if (!pci[0]) {
    snprintf(v->why, sizeof v->why, "the CUDA driver gave no PCI bus id to match NVML's GPUs");
    return;
  }
  for (size_t i = 0; i < v->ops->count(v->c); i++) {
    const struct gpu_info *gi = v->ops->info(v->c, i);
    if (gi && gi->parent_index < 0 && burn_pci_same(gi->pci_bus_id, pci)) {
      v->idx = i;
      v->ok = true;
      return;
    }
  }
  snprintf(v->why, sizeof v->why, "NVML lists no GPU with PCI bus id %s", pci);
}

static void nvml_close_view(struct nvml_view *v) {
  if (v->c)
    v->ops->close(v->c);
  v->c = NULL;
  v->ok = false;
}

/* Reads utilisation and memory used; each is NAN when NVML does not give it. */
static void nvml_read(struct nvml_view *v, double *util, double *mem_mib) {
  *util = *mem_mib = NAN;
  if (!v->ok)
    return;
  struct gpu_sample s;
  memset(&s, 0, sizeof s);
  char err[256] = "";
  if (v->ops->sample(v->c, v->idx, &s, err, sizeof err) != 0) {
    static struct log_complain lc;
    if (log_complain(&lc, (int64_t)mono_ms()))
      LOG_WARN("burn", "NVML read failed: %s", err);
    return;
  }
  if (sample_has(&s, GF_GPU_UTIL))
    *util = s.v[GF_GPU_UTIL];
  if (sample_has(&s, GF_MEM_USED_MIB))
    *mem_mib = s.v[GF_MEM_USED_MIB];
}

/* ---- the loop ---- */

struct burn_run {
  struct burn_gpu *gpu;
  struct burn_plan *plan;
  struct burn_duty duty;
  struct nvml_view nvml;
  bool closed_loop, tty;
  double duration_ms;
  uint64_t kernels;
  double busy_ms;
  char err[1024];
};

/* A reading as a whole number, or "-" when NVML did not give it (never a made-up 0). */
static void fmt_num(char *buf, size_t len, double v) {
  if (isfinite(v))
    snprintf(buf, len, "%.0f", v);
  else
    snprintf(buf, len, "-");
}

static void print_status(struct burn_run *r, double t_s, double util_asked, double duty,
                         uint64_t mem_asked) {
  double util = NAN, mem = NAN;
  nvml_read(&r->nvml, &util, &mem);
  if (r->closed_loop)
    burn_duty_observe_nvml(&r->duty, util_asked, util);
  char u[16], m[24];
  fmt_num(u, sizeof u, util);
  fmt_num(m, sizeof m, mem);
  printf("%st=%.0fs util_asked=%.0f util_nvml=%s duty=%.3f mem_asked_mib=%.0f "
         "mem_held_mib=%.0f mem_nvml_mib=%s%s",
         r->tty ? "\r" : "", t_s, util_asked, u, duty, (double)mem_asked / BURN_MIB,
         (double)r->gpu->held / BURN_MIB, m, r->tty ? "\033[K" : "\n");
  fflush(stdout);
}

/* Runs the duty cycle until --duration or a signal. Returns a burn_exit status. */
static int burn_loop(struct burn_run *r, double period_ms) {
  double t0 = mono_ms(), next_status = t0, next_mem = t0;
  uint64_t mem_asked = 0;
  for (uint64_t k = 0; !stop_signal; k++) {
    double now = mono_ms();
    double t_s = (now - t0) / 1000.0;
    if (r->duration_ms > 0 && now - t0 >= r->duration_ms)
      break;
    if (now >= next_mem) { /* memory follows the plan once a second, as NVML samples it */
      mem_asked = burn_plan_memory(r->plan, t_s);
      int st = burn_gpu_memory(r->gpu, mem_asked, r->err, sizeof r->err);
      if (st != BURN_EXIT_OK)
        return st;
      next_mem += STATUS_MS;
    }
    double util = burn_plan_util(r->plan, t_s);
    double duty = burn_duty_fraction(&r->duty, util);
    double on_ms = duty * period_ms;
    if (r->duration_ms > 0 && on_ms > t0 + r->duration_ms - now)
      on_ms = t0 + r->duration_ms - now; /* the last period ends with the run */
    uint64_t iters = on_ms >= MIN_KERNEL_MS ? burn_duty_iterations(&r->duty, on_ms) : 0;
    if (iters) {
      double ms = 0;
      int st = burn_gpu_run(r->gpu, iters, &ms, r->err, sizeof r->err);
      if (st != BURN_EXIT_OK)
        return st;
      burn_duty_observe_kernel(&r->duty, iters, ms);
      r->kernels++;
      r->busy_ms += ms;
    }
    if (mono_ms() >= next_status) {
      print_status(r, t_s, util, duty, mem_asked);
      next_status += STATUS_MS;
    }
    /* Periods start on a fixed grid, so a late wake-up shortens the next sleep; after a stall of
     * more than a period the grid moves on instead of bursting to catch up. */
    double end = t0 + (double)(k + 1) * period_ms;
    now = mono_ms();
    if (now > end + period_ms)
      k = (uint64_t)((now - t0) / period_ms);
    else
      sleep_until(end);
  }
  return BURN_EXIT_OK;
}

static int resolve_memory(const struct burn_opts *o, struct burn_plan *plan,
                          const struct burn_gpu *g, char *err, size_t errlen) {
  double bytes, pct;
  if (burn_size_parse(o->memory, &bytes, &pct, err, errlen) != 0)
    return BURN_EXIT_USAGE;
  if (pct > 0)
    bytes = floor((double)g->total_bytes * pct / 100.0);
  if (bytes > (double)g->total_bytes) {
    snprintf(err, errlen, "--memory %s is more than the GPU's %.0f MiB", o->memory,
             (double)g->total_bytes / BURN_MIB);
    return BURN_EXIT_NO_MEMORY;
  }
  plan->mem_bytes = bytes;
  return BURN_EXIT_OK;
}

static int burn_run_all(const struct burn_opts *o, struct burn_plan *plan) {
  struct burn_gpu gpu;
  struct burn_run r;
  memset(&r, 0, sizeof r);
  r.gpu = &gpu;
  r.plan = plan;
  r.closed_loop = o->closed_loop;
  r.tty = isatty(STDOUT_FILENO);
  r.duration_ms = (double)o->duration_ms;
  r.duty.period_ms = (double)o->cycle_ms;
  int st = burn_gpu_open(&gpu, o->cuda_library, (int)o->gpu, r.err, sizeof r.err);
  if (st != BURN_EXIT_OK) {
    fprintf(stderr, "gpuscale burn: %s\n", r.err);
    return st;
  }
  st = resolve_memory(o, plan, &gpu, r.err, sizeof r.err);
  if (st == BURN_EXIT_OK) {
    nvml_open_view(&r.nvml, o->nvml_library, gpu.pci);
    if (!r.nvml.ok && o->closed_loop) {
      snprintf(r.err, sizeof r.err, "--closed-loop needs NVML readings of the GPU: %s", r.nvml.why);
      st = BURN_EXIT_NO_NVML;
    } else if (!r.nvml.ok) {
      fprintf(stderr, "gpuscale burn: no NVML readings (shown as -): %s\n", r.nvml.why);
    }
  }
  if (st == BURN_EXIT_OK) {
    fprintf(stderr,
            "gpuscale burn: GPU %lld %s (%s, %.0f MiB, %u blocks x %u threads), cycle %lldms%s\n",
            o->gpu, gpu.name, gpu.pci[0] ? gpu.pci : "no bus id",
            (double)gpu.total_bytes / BURN_MIB, gpu.grid, gpu.block, (long long)o->cycle_ms,
            o->closed_loop ? ", closed loop" : "");
    /* The memory first: an out-of-memory shows before any kernel, and calibration runs with
     * the GPU as loaded as the run will be. */
    st = burn_gpu_memory(&gpu, burn_plan_memory(plan, 0), r.err, sizeof r.err);
  }
  if (st == BURN_EXIT_OK) {
    unsigned kernels = 0;
    st = burn_gpu_calibrate(&gpu, CALIBRATE_MS, &r.duty.rate, &kernels, r.err, sizeof r.err);
    if (st == BURN_EXIT_OK)
      fprintf(stderr, "gpuscale burn: calibrated: %.0f kernel iterations per ms (%u kernels)\n",
              r.duty.rate, kernels);
  }
  if (st == BURN_EXIT_OK) {
    double t0 = mono_ms();
    st = burn_loop(&r, (double)o->cycle_ms);
    double ran = (mono_ms() - t0) / 1000.0;
    if (r.tty)
      printf("\n");
    printf("burn: %s after %.1fs: %llu kernels, GPU busy %.0f ms (%.1f%% of the run)\n",
           st != BURN_EXIT_OK ? "failed"
           : stop_signal      ? (stop_signal == SIGINT ? "stopped by SIGINT" : "stopped by SIGTERM")
                              : "done",
           ran, (unsigned long long)r.kernels, r.busy_ms, ran > 0 ? r.busy_ms / ran / 10.0 : 0.0);
    fflush(stdout);
  }
  if (st != BURN_EXIT_OK)
    fprintf(stderr, "gpuscale burn: %s\n", r.err);
  nvml_close_view(&r.nvml);
  burn_gpu_close(&gpu);
  return st;
}

int burn_main(int argc, char **argv) {
  struct burn_opts o;
  memset(&o, 0, sizeof o);
  char err[1024] = "";
  int ac = 0;
  char **av = rewrite_argv(argc, argv, &ac);
  if (!av) {
    fprintf(stderr, "gpuscale burn: out of memory\n");
    return BURN_EXIT_ERROR;
  }
  int rc = config_parse(burn_defs, NDEFS, ac, av, 1, &o, err, sizeof err);
  free(av);
  if (rc == 1) {
    config_help(stdout, burn_usage, burn_desc, burn_defs, NDEFS);
    config_free(burn_defs, NDEFS, &o);
    return BURN_EXIT_OK;
  }
  if (rc) {
    fprintf(stderr, "gpuscale burn: %s\n", err);
    config_free(burn_defs, NDEFS, &o);
    return BURN_EXIT_USAGE;
  }
  enum log_level lvl = LOG_LVL_WARN;
  log_level_parse(o.log_level, &lvl);
  log_setup(lvl, LOG_FMT_LOGFMT);
  config_log("burn", burn_defs, NDEFS, &o);
  struct burn_plan plan;
  int st = BURN_EXIT_USAGE;
  double b, p;
  if (build_plan(&o, &plan, err, sizeof err) != 0 ||
      burn_size_parse(o.memory, &b, &p, err, sizeof err) != 0) {
    fprintf(stderr, "gpuscale burn: %s\n", err);
  } else if (plan.follow != BURN_FOLLOW_UTIL && !(b > 0) && !(p > 0)) {
    fprintf(stderr,
            "gpuscale burn: --follow %s needs --memory SIZE (the memory at the pattern's "
            "peak)\n",
            o.follow);
  } else {
    install_signals();
    st = burn_run_all(&o, &plan);
  }
  free(plan.level.points);
  config_free(burn_defs, NDEFS, &o);
  return st;
}
