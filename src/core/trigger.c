/* Validates KEDA trigger metadata into a struct trigger, with errors that name key, value and rule.
 */
#include "core/trigger.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/err.h"
#include "core/timeutil.h"

#define WINDOW_MAX_MS (24LL * 3600 * 1000)
#define GS_XSTR(x) #x
#define GS_STR(x) GS_XSTR(x)
#define GPU_INDEX_MAX 1023

static const char scaler_metrics[] = TRIGGER_SCALER_METRICS;

/* The GPU fields a trigger may scale on. The GPM ones (sm_active...) exist only on GPUs with
 * GPM, and are the only activity a MIG instance has; gr_engine_active is there for MIG, where
 * gpu_utilization is not. The throughputs use the reference scaler's names and units. */
static bool is_scaler_metric(enum gpu_field f) {
  switch (f) {
  case GF_GPU_UTIL:
  case GF_MEM_UTIL:
  case GF_MEM_USED_PCT:
  case GF_MEM_USED_MIB:
  case GF_TEMP_C:
  case GF_POWER_W:
  case GF_GR_ENGINE_ACTIVE:
  case GF_SM_ACTIVE:
  case GF_SM_OCCUPANCY:
  case GF_TENSOR_ACTIVE:
  case GF_DRAM_ACTIVE:
  case GF_PCIE_TX_KBPS:
  case GF_PCIE_RX_KBPS:
  case GF_NVLINK_TX_MBPS:
  case GF_NVLINK_RX_MBPS: return true;
  default: return false;
  }
}

bool trigger_scaler_metric(enum gpu_field f) {
  return is_scaler_metric(f);
}

/* Engine signals (core/engine.h), read per engine pod: docs/engines.md. */
static const char engine_metrics[] =
    "vllm_queue_depth, vllm_requests_running, vllm_kv_cache_usage, tgi_queue_size, "
    "tgi_batch_size, sglang_queue_depth, sglang_token_usage, triton_pending_requests, "
    "triton_queue_wait_ms, triton_request_rate, trtllm_active_requests, trtllm_queued_requests, "
    "sglang_requests_running, vllm_requests_in_flight, tgi_requests_in_flight, "
    "sglang_requests_in_flight (these three with maxNumSeqs); latency quantiles "
    "vllm_ttft_seconds, vllm_queue_time_seconds, vllm_inter_token_latency_seconds, "
    "sglang_ttft_seconds, sglang_queue_time_seconds, sglang_inter_token_latency_seconds, "
    "tgi_ttft_seconds, tgi_queue_time_seconds, triton_ttft_seconds (with quantile); "
    "vllm_waiting_prompt_tokens, "
    "vllm_prefill_tokens_per_second, "
    "vllm_expected_queue_wait_seconds, sglang_waiting_prompt_tokens, "
    "sglang_prefill_tokens_per_second, sglang_expected_queue_wait_seconds";

static const char *md_get(const struct kv *md, size_t n, const char *key) {
  const char *v = NULL;
  for (size_t i = 0; i < n; i++)
    if (md[i].key && strcmp(md[i].key, key) == 0)
      v = md[i].value ? md[i].value : "";
  return v;
}

static int bad(char *err, size_t errlen, const char *key, const char *val, const char *rule) {
  snprintf(err, errlen, "invalid trigger metadata: %s=\"%.80s\": %s", key, val, rule);
  return GS_EINVAL;
}

/* A whole-string finite number; leading/trailing spaces allowed. */
static int parse_number(const char *s, double *out) {
  while (isspace((unsigned char)*s))
    s++;
  if (!*s)
    return GS_EINVAL;
  if (s[strspn(s, " \t0123456789.+-eE")] != '\0') /* no hex, inf or nan spellings */
    return GS_EINVAL;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  while (isspace((unsigned char)*end))
    end++;
  if (*end || errno == ERANGE || !isfinite(v))
    return GS_EINVAL;
  *out = v;
  return 0;
}

static int parse_indices(const char *s, struct trigger *t) {
  const char *p = s;
  t->n_indices = 0;
  for (;;) {
    while (isspace((unsigned char)*p))
      p++;
    if (!isdigit((unsigned char)*p))
      return GS_EINVAL;
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (errno || v < 0 || v > GPU_INDEX_MAX)
      return GS_EINVAL;
    for (size_t i = 0; i < t->n_indices; i++)
      if (t->indices[i] == (int)v)
        return GS_EINVAL;
    if (t->n_indices == TRIGGER_MAX_INDICES)
      return GS_EINVAL;
    t->indices[t->n_indices++] = (int)v;
    p = end;
    while (isspace((unsigned char)*p))
      p++;
    if (!*p)
      return 0;
    if (*p != ',')
      return GS_EINVAL;
    p++;
  }
}

/* A whole-string integer (spaces around allowed, no sign but an optional '+' or '-'). */
static int parse_int(const char *s, long *out) {
  while (isspace((unsigned char)*s))
    s++;
  const char *d = s + (*s == '+' || *s == '-');
  if (!isdigit((unsigned char)*d))
    return GS_EINVAL;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  while (isspace((unsigned char)*end))
    end++;
  if (*end || errno == ERANGE)
    return GS_EINVAL;
  *out = v;
  return 0;
}

/* gpuIndex: "-1" is every GPU (keda-gpu-scaler's default); other negatives are refused. */
static int parse_gpu_index(const char *v, struct trigger *t, char *err, size_t errlen) {
  long one;
  if (parse_int(v, &one) == 0 && one < 0) {
    if (one == -1) {
      t->n_indices = 0;
      return 0;
    }
    return bad(err, errlen, "gpuIndex", v,
               "a negative index is allowed only as \"-1\" (every GPU); else a GPU index "
               "(0..1023) or a comma-separated list, e.g. \"0\" or \"0,2\"");
  }
  if (parse_indices(v, t))
    return bad(err, errlen, "gpuIndex", v,
               "must be a GPU index (0..1023), a comma-separated list of distinct indices, or "
               "\"-1\" for every GPU, e.g. \"0\" or \"0,2\"");
  return 0;
}

static bool valid_metric_name(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n >= 100)
    return false;
  for (const char *p = s; *p; p++)
    if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.')
      return false;
  return true;
}

static const char *scope_names[] = {"auto", "node", "cluster", "workload"};

const char *trigger_scope_name(enum trigger_scope s) {
  return (unsigned)s < sizeof scope_names / sizeof scope_names[0] ? scope_names[s] : "?";
}

bool trigger_selects_pods(const struct trigger *t) {
  return t->scope == TRIGGER_SCOPE_WORKLOAD || t->ns[0] || t->pods.set;
}

void trigger_free(struct trigger *t) {
  if (!t)
    return;
  struct trigger_regex *rs[] = {&t->pods, &t->nodes, &t->gpu_model};
  for (size_t i = 0; i < sizeof rs / sizeof rs[0]; i++) {
    if (rs[i]->set)
      regfree(&rs[i]->re);
    rs[i]->set = false;
  }
}

bool trigger_regex_match(const struct trigger_regex *r, const char *s) {
  if (!r->set)
    return true;
  /* POSIX leftmost-longest: a whole-string match exists iff the leftmost-longest one spans s.
   * Checking the span (instead of wrapping the pattern in ^( )$) keeps "a|b" and odd parentheses
   * meaning what the user wrote. */
  regmatch_t m;
  if (regexec(&r->re, s, 1, &m, 0) != 0)
    return false;
  return m.rm_so == 0 && (size_t)m.rm_eo == strlen(s);
}

/* Past the end of a bracket expression starting at p ('['), or NULL when it is not closed. */
static const char *skip_bracket(const char *p) {
  p++;
  if (*p == '^')
    p++;
  if (*p == ']')
    p++; /* a leading ']' is a literal */
  while (*p && *p != ']') {
    if (p[0] == '[' && (p[1] == ':' || p[1] == '.' || p[1] == '=')) {
      const char *end = strchr(p + 2, p[1]);
      while (end && end[1] != ']')
        end = strchr(end + 1, p[1]);
      if (!end)
        return NULL;
      p = end + 2;
    } else {
      p++;
    }
  }
  return *p ? p + 1 : NULL;
}

/* A bound {m}, {m,}, {m,n} or {,n} at p ('{'): returns past it with the copies glibc makes of
 * the repeated item (n, or m + 1 when unbounded), or NULL when it is not a bound. */
static const char *parse_bound(const char *p, double *copies) {
  const char *q = p + 1;
  long m = 0, n;
  char *end = (char *)q;
  if (isdigit((unsigned char)*q))
    m = strtol(q, &end, 10);
  else if (*q != ',')
    return NULL;
  if (m > RE_DUP_MAX) /* regcomp refuses it: REG_ESIZE or REG_BADBR */
    return NULL;
  n = m;
  if (*end == ',') {
    q = end + 1;
    if (isdigit((unsigned char)*q))
      n = strtol(q, &end, 10);
    else {
      n = m + 1;
      end = (char *)q;
    }
  }
  if (*end != '}' || m > RE_DUP_MAX || n > RE_DUP_MAX)
    return NULL;
  *copies = (double)(n > 1 ? n : 1);
  return end + 1;
}

/* One open group of a pattern, for regex_risk: the item copies so far, and whether the current
 * branch (and any earlier branch) can match the empty string. */
struct re_frame {
  double copies, last; /* item copies in the group; of its last item */
  bool last_null;      /* the last item can match the empty string */
  bool pre_null;       /* the branch could match empty before the last item */
  bool branch_null;    /* the branch so far can */
  bool any_null;       /* an earlier branch could */
  bool have_last;
};

static void re_item(struct re_frame *f, double copies, bool nullable) {
  f->copies += copies;
  f->last = copies;
  f->pre_null = f->branch_null;
  f->branch_null = f->branch_null && nullable;
  f->last_null = nullable;
  f->have_last = true;
}

/* glibc's regcomp is slow or huge on some patterns: it spells repetitions out ('+' copies what it
 * repeats twice, {m,n} n times) and nested repetitions multiply, so "a++++++++++++++++++++" or
 * sixteen nested "(...)+" take gigabytes; and repeating something that can match the empty
 * string ("(a*)+", "(a?){64}", "^+") takes seconds to minutes. Returns why v is refused, or
 * NULL. What follows an unclosed bracket is left to regcomp, which refuses it. */
static const char *regex_risk(const char *p) {
  struct re_frame st[TRIGGER_REGEX_MAX + 2];
  int d = 0;
  memset(&st[0], 0, sizeof st[0]);
  st[0].branch_null = true;
  while (*p) {
    struct re_frame *f = &st[d];
    const char *next = p + 1, *bound_end;
    double rep = 0;
    bool rep_null = false;
    if (*p == '\\') {
      if (p[1] >= '1' && p[1] <= '9')
        return "back-references (\\1..\\9) are not allowed: they make matching exponential";
      re_item(f, 1, p[1] && strchr("bB<>`'", p[1])); /* word and buffer anchors match empty */
      next = p[1] ? p + 2 : p + 1;
    } else if (*p == '[') {
      if (!(next = skip_bracket(p)))
        break;
      re_item(f, 1, false);
    } else if (*p == '(' && d <= TRIGGER_REGEX_MAX) {
      d++;
      memset(&st[d], 0, sizeof st[d]);
      st[d].branch_null = true;
    } else if (*p == ')' && d > 0) {
      bool null = st[d].any_null || st[d].branch_null;
      double copies = st[d].copies;
      d--;
      re_item(&st[d], copies, null);
    } else if (*p == '|') {
      f->any_null = f->any_null || f->branch_null;
      f->branch_null = true;
      f->have_last = false;
    } else if (*p == '^' || *p == '$') {
      re_item(f, 1, true);
    } else if (*p == '*' || *p == '?') {
      rep = 1;
      rep_null = true;
    } else if (*p == '+') {
      rep = 2;
    } else if (*p == '{' && (bound_end = parse_bound(p, &rep))) {
      rep_null = p[1] == ',' || (p[1] == '0' && !isdigit((unsigned char)p[2]));
      next = bound_end;
    } else {
      re_item(f, 1, false);
    }
    f = &st[d];
    if (rep > 0 && f->have_last) {
      if (f->last_null)
        return "repeats something that can match the empty string (like \"(a*)+\", \"(x|)*\" or "
               "\"^+\"), which glibc's regcomp takes minutes over; write \"a*\" instead";
      f->copies += f->last * (rep - 1);
      f->last *= rep;
      if (rep_null) {
        f->last_null = true;
        f->branch_null = f->pre_null;
      }
    }
    if (f->copies > TRIGGER_REGEX_COPIES || f->last > TRIGGER_REGEX_COPIES)
      return "repetitions multiply to more than " GS_STR(
          TRIGGER_REGEX_COPIES) " copies of the pattern's items (each '+' doubles what it repeats, "
                                "{m,n} repeats it "
                                "n times); write fewer nested repetitions";
    p = next;
  }
  double total = 0;
  for (int i = 0; i <= d; i++)
    total += st[i].copies;
  return total > TRIGGER_REGEX_COPIES ? "repetitions multiply to more than " GS_STR(
                                            TRIGGER_REGEX_COPIES) " copies of the pattern's items"
                                      : NULL;
}

static int compile_regex(const char *key, const char *v, struct trigger_regex *r, char *err,
                         size_t errlen) {
  char rule[384];
  size_t len = strlen(v);
  if (len == 0 || len > TRIGGER_REGEX_MAX) {
    snprintf(rule, sizeof rule,
             "must be a POSIX extended regular expression of 1..%d characters, matched against "
             "the whole name, e.g. \"vllm-deployment-.*\"",
             TRIGGER_REGEX_MAX);
    return bad(err, errlen, key, v, rule);
  }
  const char *risk = regex_risk(v);
  if (risk)
    return bad(err, errlen, key, v, risk);
  int rc = regcomp(&r->re, v, REG_EXTENDED);
  if (rc == REG_ESPACE) { /* not the pattern's fault: no INVALID_ARGUMENT for it */
    snprintf(err, errlen, "%s: out of memory compiling the regular expression", key);
    return GS_ENOMEM;
  }
  if (rc != 0) {
    char why[160];
    regerror(rc, &r->re, why, sizeof why);
    snprintf(rule, sizeof rule,
             "not a valid POSIX extended regular expression (%s); it is matched against the whole "
             "name, e.g. \"vllm-deployment-.*\"",
             why);
    return bad(err, errlen, key, v, rule);
  }
  memcpy(r->src, v, len + 1);
  r->set = true;
  return 0;
}

/* DNS-1123 label (a Kubernetes namespace): 1..63 of [a-z0-9-], alphanumeric at both ends. */
static bool valid_label(const char *s, size_t max) {
  size_t n = strlen(s);
  if (n == 0 || n > max || s[0] == '-' || s[n - 1] == '-')
    return false;
  for (const char *p = s; *p; p++)
    if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '-'))
      return false;
  return true;
}

/* A node name: DNS-1123 subdomain, 1..253 of [a-z0-9.-], alphanumeric at both ends. */
static bool valid_node_name(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 253 || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
    return false;
  for (const char *p = s; *p; p++)
    if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '-' || *p == '.'))
      return false;
  return true;
}

static int parse_bool(const char *s, bool *out) {
  if (strcasecmp(s, "true") == 0)
    *out = true;
  else if (strcasecmp(s, "false") == 0)
    *out = false;
  else
    return GS_EINVAL;
  return 0;
}

static int parse_scope_keys(const struct kv *md, size_t n, struct trigger *t, char *err,
                            size_t errlen) {
  const char *v;
  if ((v = md_get(md, n, "scope"))) {
    if (strcmp(v, "node") == 0)
      t->scope = TRIGGER_SCOPE_NODE;
    else if (strcmp(v, "cluster") == 0)
      t->scope = TRIGGER_SCOPE_CLUSTER;
    else if (strcmp(v, "workload") == 0)
      t->scope = TRIGGER_SCOPE_WORKLOAD;
    else
      return bad(err, errlen, "scope", v,
                 "allowed: node, cluster, workload (default: workload when pods is given, else "
                 "node at the agent and cluster at the gateway)");
  }
  if ((v = md_get(md, n, "namespace"))) {
    if (!valid_label(v, TRIGGER_NS_LEN - 1))
      return bad(err, errlen, "namespace", v,
                 "must be a Kubernetes namespace name: 1..63 characters of a-z, 0-9 and '-'");
    snprintf(t->ns, sizeof t->ns, "%s", v);
    t->gateway_keys = true;
  }
  if ((v = md_get(md, n, "node"))) {
    if (!valid_node_name(v))
      return bad(err, errlen, "node", v,
                 "must be a Kubernetes node name: 1..253 characters of a-z, 0-9, '-' and '.'");
    snprintf(t->node, sizeof t->node, "%s", v);
    t->gateway_keys = true;
  }
  if ((v = md_get(md, n, "value"))) {
    if (strcmp(v, "sum") == 0)
      t->value = TRIGGER_VALUE_SUM;
    else if (strcmp(v, "average") == 0)
      t->value = TRIGGER_VALUE_AVERAGE;
    else
      return bad(err, errlen, "value", v,
                 "allowed: sum (the default, for metricType AverageValue), average (for "
                 "metricType Value)");
  }
  if ((v = md_get(md, n, "allowPartial"))) {
    if (parse_bool(v, &t->allow_partial))
      return bad(err, errlen, "allowPartial", v, "allowed: true, false");
  }
  if ((v = md_get(md, n, "minCoverage"))) {
    if (parse_number(v, &t->min_coverage) || t->min_coverage <= 0 || t->min_coverage > 1)
      return bad(err, errlen, "minCoverage", v,
                 "must be a fraction greater than 0 and at most 1, e.g. \"0.75\"");
    t->has_min_coverage = true;
  }
  return 0;
}

static int parse_selectors(const struct kv *md, size_t n, struct trigger *t, char *err,
                           size_t errlen) {
  static const struct {
    const char *key;
    size_t off;
  } keys[] = {{"pods", offsetof(struct trigger, pods)},
              {"nodes", offsetof(struct trigger, nodes)},
              {"gpuModel", offsetof(struct trigger, gpu_model)}};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    const char *v = md_get(md, n, keys[i].key);
    if (!v)
      continue;
    int rc = compile_regex(keys[i].key, v, (struct trigger_regex *)((char *)t + keys[i].off), err,
                           errlen);
    if (rc)
      return rc;
    if (i > 0)
      t->gateway_keys = true;
  }
  return 0;
}

/* Resolves the default scope and checks the keys that only make sense together. */
static int check_scope(const struct kv *md, size_t n, const char *ref_ns, struct trigger *t,
                       char *err, size_t errlen) {
  bool explicit_scope = md_get(md, n, "scope") != NULL;
  if (!explicit_scope)
    t->scope = t->pods.set  ? TRIGGER_SCOPE_WORKLOAD
               : t->node[0] ? TRIGGER_SCOPE_NODE
                            : TRIGGER_SCOPE_AUTO;
  const char *sc = trigger_scope_name(t->scope);
  char rule[256];
  if (md_get(md, n, "value") && t->scope != TRIGGER_SCOPE_WORKLOAD) {
    snprintf(rule, sizeof rule,
             "applies to workload scope only (scope: workload, or pods given), not scope %s, "
             "where aggregation decides the value",
             sc);
    return bad(err, errlen, "value", md_get(md, n, "value"), rule);
  }
  if (t->node[0] && t->scope != TRIGGER_SCOPE_NODE) {
    snprintf(rule, sizeof rule,
             "names the one node of scope node, not scope %s; use nodes (a regex) to filter", sc);
    return bad(err, errlen, "node", t->node, rule);
  }
  if (t->n_indices > 0 &&
      (t->scope == TRIGGER_SCOPE_CLUSTER || t->scope == TRIGGER_SCOPE_WORKLOAD)) {
    snprintf(rule, sizeof rule,
             "picks GPUs of one node and applies to scope node only, not scope %s; filter with "
             "nodes, gpuModel or pods instead",
             sc);
    return bad(err, errlen, "gpuIndex", md_get(md, n, "gpuIndex"), rule);
  }
  if (t->has_min_coverage && md_get(md, n, "allowPartial") && !t->allow_partial &&
      t->min_coverage < 1)
    return bad(err, errlen, "minCoverage", md_get(md, n, "minCoverage"),
               "allows a partial answer, which contradicts allowPartial: \"false\"; drop one");
  if (!t->has_min_coverage)
    t->min_coverage = 1;
  if (t->scope == TRIGGER_SCOPE_WORKLOAD && !t->ns[0] && ref_ns && *ref_ns) {
    if (!valid_label(ref_ns, TRIGGER_NS_LEN - 1))
      return bad(err, errlen, "namespace", ref_ns,
                 "the ScaledObject's namespace is not a valid namespace name; set namespace");
    snprintf(t->ns, sizeof t->ns, "%s", ref_ns);
  }
  return 0;
}

static int parse_gateway_keys(const struct kv *md, size_t n, const char *ref_ns, struct trigger *t,
                              char *err, size_t errlen) {
  int rc = parse_scope_keys(md, n, t, err, errlen);
  if (!rc)
    rc = parse_selectors(md, n, t, err, errlen);
  if (!rc)
    rc = check_scope(md, n, ref_ns, t, err, errlen);
  if (rc)
    trigger_free(t);
  return rc;
}

int trigger_parse(const struct kv *md, size_t n, const struct profile_set *ps, struct trigger *out,
                  char *err, size_t errlen) {
  return trigger_parse_ref(md, n, ps, NULL, out, err, errlen);
}

/* profile, metricType, targetValue and the two keda-gpu-scaler shorthands. Applied in the
 * reference scaler's order, so that its triggers mean the same here: the profile, then
 * metricType and targetValue, then targetGpuUtilization, then targetMemoryUtilization (the last
 * one given wins the metric and the target). */
static int parse_metric_keys(const struct kv *md, size_t n, const struct profile_set *ps,
                             struct trigger *t, char *err, size_t errlen) {
  char rule[1536];
  const char *v;
  if ((v = md_get(md, n, "profile"))) {
    const struct profile *p = profile_find(ps, v);
    if (!p) {
      char names[384];
      profile_names(ps, names, sizeof names);
      snprintf(rule, sizeof rule, "unknown profile; allowed: %s", names);
      return bad(err, errlen, "profile", v, rule);
    }
    snprintf(t->profile, sizeof t->profile, "%s", p->name);
    t->metric = p->metric;
    t->target = p->target;
    t->activation = p->activation;
    t->agg = p->agg;
    t->engine = p->engine;
    t->esignal = p->esignal;
  }
  if ((v = md_get(md, n, "metricType"))) {
    if (engine_signal_parse(v, &t->esignal) == 0) {
      t->engine = true;
    } else if (gpu_field_parse(v, &t->metric) || !is_scaler_metric(t->metric)) {
      snprintf(rule, sizeof rule, "allowed: %s; engine signals (per pod, docs/engines.md): %s",
               scaler_metrics, engine_metrics);
      return bad(err, errlen, "metricType", v, rule);
    } else {
      t->engine = false;
    }
  }
  static const struct {
    const char *key;
    bool sets_metric;
    enum gpu_field metric;
  } targets[] = {{"targetValue", false, GF_GPU_UTIL},
                 {"targetGpuUtilization", true, GF_GPU_UTIL},
                 {"targetMemoryUtilization", true, GF_MEM_USED_PCT}};
  for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
    if (!(v = md_get(md, n, targets[i].key)))
      continue;
    if (parse_number(v, &t->target) || t->target <= 0)
      return bad(err, errlen, targets[i].key, v, "must be a finite number greater than 0");
    if (targets[i].sets_metric) {
      t->metric = targets[i].metric;
      t->engine = false;
    }
  }
  return 0;
}

/* Keys that only keda-gpu-scaler gives a meaning to: accepted where gpuscale can honour them,
 * refused with what is coming where it cannot yet. */
static int parse_reference_keys(const struct kv *md, size_t n, struct trigger *t, char *err,
                                size_t errlen) {
  const char *v;
  if ((v = md_get(md, n, "pollIntervalSeconds"))) {
    long s;
    if (parse_int(v, &s) || s < 1 || s > INT32_MAX)
      return bad(err, errlen, "pollIntervalSeconds", v,
                 "must be a whole number of seconds >= 1, e.g. \"10\" (it changes no timing: "
                 "StreamIsActive follows the sampler, within one --interval)");
    t->poll_interval_s = (int)s;
  }
  return 0;
}

/* vllmEndpoint / tritonEndpoint (keda-gpu-scaler's URL to scrape). A URL in trigger metadata is
 * one pod behind a Service, and one any ScaledObject author can point anywhere: refused with how
 * to annotate the pods instead, unless the operator allowed URLs (ps->endpoint_check), and then
 * only a URL that passes the check, for a metricType of that engine. */
static int parse_endpoint_keys(const struct kv *md, size_t n, const struct profile_set *ps,
                               struct trigger *t, char *err, size_t errlen) {
  static const struct {
    const char *key, *engine, *port;
    enum engine_kind kind;
  } eps[] = {{"vllmEndpoint", "vllm", "8000", ENGINE_VLLM},
             {"tritonEndpoint", "triton", "8002", ENGINE_TRITON}};
  char rule[640];
  for (size_t i = 0; i < sizeof eps / sizeof eps[0]; i++) {
    const char *v = md_get(md, n, eps[i].key);
    if (!v)
      continue;
    if (!ps || !ps->endpoint_check) {
      snprintf(rule, sizeof rule,
               "gpuscale reads no URL from trigger metadata: it reads every engine pod on every "
               "node itself. Annotate the engine pods instead (gpuscale.io/engine: \"%s\", "
               "gpuscale.io/metrics-port: \"%s\", gpuscale.io/metrics-path: \"/metrics\"), "
               "remove %s and select the pods with namespace and pods through the gateway "
               "(docs/engines.md); an operator may allow URLs with the agent's "
               "--allow-engine-endpoints",
               eps[i].engine, eps[i].port, eps[i].key);
      return bad(err, errlen, eps[i].key, v, rule);
    }
    if (!t->engine || engine_signal_kind(t->esignal) != eps[i].kind) {
      snprintf(rule, sizeof rule, "is read only for a %s metricType (metricType %s is not)",
               eps[i].engine, trigger_metric_label(t));
      return bad(err, errlen, eps[i].key, v, rule);
    }
    if (strlen(v) >= TRIGGER_URL_LEN) {
      snprintf(rule, sizeof rule, "must be an http(s) URL of at most %d characters",
               TRIGGER_URL_LEN - 1);
      return bad(err, errlen, eps[i].key, v, rule);
    }
    char why[384] = "";
    if (ps->endpoint_check(v, why, sizeof why) != 0) {
      snprintf(rule, sizeof rule,
               "refused even with --allow-engine-endpoints: %s (an http(s) URL whose address is "
               "not loopback, link-local or a metadata address)",
               why[0] ? why : "not an allowed URL");
      return bad(err, errlen, eps[i].key, v, rule);
    }
    snprintf(t->endpoint, sizeof t->endpoint, "%s", v);
    t->endpoint_key = eps[i].key;
  }
  return 0;
}

/* The latency metricTypes, for the keys that only they take (quantile, window). */
static const char latency_metrics[] =
    "vllm_ttft_seconds, vllm_queue_time_seconds, vllm_inter_token_latency_seconds, "
    "sglang_ttft_seconds, sglang_queue_time_seconds, sglang_inter_token_latency_seconds, "
    "tgi_ttft_seconds, tgi_queue_time_seconds, triton_ttft_seconds";

/* Keys that mean GPUs, next to an engine metric (read per pod): refused rather than ignored, so
 * that a trigger never silently means less than it says. Also pods with a URL. window is the one
 * GPU key a latency metricType takes: the requests finished within it, summed over the pods'
 * scrapes (docs/engines.md "The window"); every other engine metricType is the newest reading. */
static int check_engine_keys(const struct kv *md, size_t n, const struct trigger *t, char *err,
                             size_t errlen) {
  char rule[512];
  static const char *const gpu_keys[] = {"gpuIndex", "gpuModel", "window"};
  bool latency = t->engine && engine_signal_latency(t->esignal) >= 0;
  for (size_t i = 0; t->engine && i < sizeof gpu_keys / sizeof gpu_keys[0]; i++) {
    const char *v = md_get(md, n, gpu_keys[i]);
    if (!v || (i == 0 && t->n_indices == 0) || (i == 2 && latency && !t->endpoint[0]))
      continue; /* gpuIndex "-1" means every GPU: nothing picked */
    if (i == 2 && latency)
      snprintf(rule, sizeof rule,
               "is not read next to %s: a window sums each engine pod's kept scrapes, while "
               "the URL is read once per call; select the pods instead (docs/engines.md)",
               t->endpoint_key ? t->endpoint_key : "an endpoint");
    else if (i == 2)
      snprintf(rule, sizeof rule,
               "applies to GPU metrics and to the latency metricTypes only (%s); metricType %s "
               "is the newest reading of each engine pod (docs/engines.md)",
               latency_metrics, trigger_metric_label(t));
    else
      snprintf(rule, sizeof rule,
               "applies to GPU metrics only; metricType %s is read per engine pod (select pods "
               "with namespace and pods; docs/engines.md)",
               trigger_metric_label(t));
    return bad(err, errlen, gpu_keys[i], v, rule);
  }
  if (t->endpoint[0]) {
    static const char *const sel_keys[] = {"pods", "namespace", "scope"};
    for (size_t i = 0; i < sizeof sel_keys / sizeof sel_keys[0]; i++) {
      const char *v = md_get(md, n, sel_keys[i]);
      if (v && !(i == 2 && strcmp(v, "node") == 0)) {
        snprintf(rule, sizeof rule,
                 "selects engine pods, while %s reads the one URL it names (node scope, at the "
                 "agent); drop one of them",
                 t->endpoint_key);
        return bad(err, errlen, sel_keys[i], v, rule);
      }
    }
  }
  return 0;
}

/* quantile: which quantile of the summed window histograms a latency metricType answers
 * (docs/engines.md "Latency"). aggregation is refused next to one: pods are merged by summing
 * their histograms, never by combining per-pod values. */
static int parse_quantile(const struct kv *md, size_t n, struct trigger *t, char *err,
                          size_t errlen) {
  const char *v = md_get(md, n, "quantile");
  bool latency = t->engine && engine_signal_latency(t->esignal) >= 0;
  if (!latency) {
    if (v) {
      char rule[384];
      snprintf(rule, sizeof rule, "applies only to the latency metricTypes (%s)", latency_metrics);
      return bad(err, errlen, "quantile", v, rule);
    }
    return 0;
  }
  const char *a = md_get(md, n, "aggregation");
  if (a) {
    char rule[256];
    snprintf(rule, sizeof rule,
             "does not apply to metricType %s: its pods are merged by summing their histograms "
             "over the window, then reading the quantile key (docs/engines.md)",
             trigger_metric_label(t));
    return bad(err, errlen, "aggregation", a, rule);
  }
  t->quantile = LATENCY_DEFAULT_QUANTILE;
  if (v && (parse_number(v, &t->quantile) || !(t->quantile > 0 && t->quantile < 1)))
    return bad(err, errlen, "quantile", v,
               "must be a number greater than 0 and less than 1, e.g. \"0.95\" or \"0.99\"");
  return 0;
}

/* minPrefillTokensPerSecond: a floor on each pod's measured prefill throughput for the expected
 * queue wait (docs/engines.md "Expected queue wait"), so that a pod that prefilled nothing in the
 * window (idle, just started) still gives a finite wait for what queues on it. */
static int parse_prefill_floor(const struct kv *md, size_t n, struct trigger *t, char *err,
                               size_t errlen) {
  const char *v = md_get(md, n, "minPrefillTokensPerSecond");
  enum engine_signal tok, rate;
  bool qw = t->engine && engine_signal_queue_wait(t->esignal, &tok, &rate);
  const char *a = md_get(md, n, "aggregation");
  if (qw && a) {
    char rule[256];
    snprintf(rule, sizeof rule,
             "does not apply to metricType %s: the selected pods' waiting prompt tokens and "
             "prefill throughputs are summed, then divided (docs/engines.md)",
             trigger_metric_label(t));
    return bad(err, errlen, "aggregation", a, rule);
  }
  if (!v)
    return 0;
  if (!qw)
    return bad(err, errlen, "minPrefillTokensPerSecond", v,
               "applies only to metricType vllm_expected_queue_wait_seconds or "
               "sglang_expected_queue_wait_seconds");
  if (parse_number(v, &t->prefill_floor) || !(t->prefill_floor > 0))
    return bad(err, errlen, "minPrefillTokensPerSecond", v,
               "must be a number of prompt tokens per second greater than 0, e.g. \"2000\"");
  return 0;
}

/* maxNumSeqs: the batch size an in-flight metricType divides by (docs/engines.md "Requests in
 * flight"). vLLM and TGI serve no series with it, so the trigger says it. */
static int parse_max_num_seqs(const struct kv *md, size_t n, struct trigger *t, char *err,
                              size_t errlen) {
  const char *v = md_get(md, n, "maxNumSeqs");
  enum engine_signal run, wait;
  bool derived = t->engine && engine_signal_derived(t->esignal, &run, &wait);
  if (!v && !derived)
    return 0;
  if (!derived)
    return bad(err, errlen, "maxNumSeqs", v,
               "applies only to metricType vllm_requests_in_flight, tgi_requests_in_flight or "
               "sglang_requests_in_flight");
  if (!v) {
    char rule[256];
    snprintf(rule, sizeof rule,
             "is needed with metricType %s: the requests one pod runs at once (vLLM "
             "--max-num-seqs, TGI --max-batch-size, SGLang --max-running-requests), which the "
             "engine does not serve",
             engine_signal_name(t->esignal));
    return bad(err, errlen, "maxNumSeqs", "", rule);
  }
  if (parse_number(v, &t->max_num_seqs) || t->max_num_seqs < 1 || t->max_num_seqs > 1e6)
    return bad(err, errlen, "maxNumSeqs", v, "must be a number from 1 to 1000000");
  return 0;
}

/* model / modelVersion: one Triton model of each pod (docs/engines.md). A Triton model name is a
 * directory name of its model repository: printable, no blank, no '/'. A version is a positive
 * integer (Triton's version directories). */
static int parse_model_keys(const struct kv *md, size_t n, struct trigger *t, char *err,
                            size_t errlen) {
  const char *m = md_get(md, n, "model"), *v = md_get(md, n, "modelVersion");
  if (!m && !v)
    return 0;
  if (!t->engine || engine_signal_kind(t->esignal) != ENGINE_TRITON) {
    char rule[256];
    snprintf(rule, sizeof rule,
             "names a Triton model, so it applies only to the Triton metricTypes "
             "(triton_pending_requests, triton_queue_wait_ms, triton_request_rate, "
             "trtllm_active_requests, trtllm_queued_requests); metricType is %s",
             trigger_metric_label(t));
    return bad(err, errlen, m ? "model" : "modelVersion", m ? m : v, rule);
  }
  if (!engine_signal_per_model(t->esignal))
    return bad(err, errlen, m ? "model" : "modelVersion", m ? m : v,
               "does not apply to triton_ttft_seconds, which sums the first-response histograms "
               "of every model a pod serves (docs/engines.md \"Triton latency\"); drop it, or "
               "select the pods of one model with pods");
  if (!m)
    return bad(err, errlen, "modelVersion", v,
               "needs model: a version of which model (e.g. model: tensorrt_llm)");
  size_t len = strlen(m);
  bool ok = len > 0 && len < sizeof t->model;
  for (size_t i = 0; ok && i < len; i++)
    ok = m[i] > ' ' && m[i] != 0x7f && m[i] != '/';
  if (!ok)
    return bad(err, errlen, "model", m,
               "must be a Triton model name: 1..127 printable characters, no blank and no '/'");
  if (t->endpoint[0])
    return bad(err, errlen, "model", m,
               "picks a model among the engine pods' readings, while tritonEndpoint reads one URL "
               "as a whole; drop one of them");
  snprintf(t->model, sizeof t->model, "%s", m);
  if (v) {
    len = strlen(v);
    ok = len > 0 && len <= 18 && v[0] != '0';
    for (size_t i = 0; ok && i < len; i++)
      ok = v[i] >= '0' && v[i] <= '9';
    if (!ok)
      return bad(err, errlen, "modelVersion", v,
                 "must be a model version: a positive integer without sign or leading 0 (e.g. 1)");
    snprintf(t->model_version, sizeof t->model_version, "%s", v);
  }
  return 0;
}

int trigger_parse_ref(const struct kv *md, size_t n, const struct profile_set *ps,
                      const char *ref_ns, struct trigger *out, char *err, size_t errlen) {
  struct trigger t;
  memset(&t, 0, sizeof t);
  /* keda-gpu-scaler's defaults, for a trigger without a profile. */
  t.metric = GF_GPU_UTIL;
  t.target = TRIGGER_DEFAULT_TARGET;
  t.activation = 0;
  t.agg = AGG_MAX;
  char rule[512];
  const char *v;

  int rc = parse_metric_keys(md, n, ps, &t, err, errlen);
  if (!rc)
    rc = parse_reference_keys(md, n, &t, err, errlen);
  if (!rc)
    rc = parse_endpoint_keys(md, n, ps, &t, err, errlen);
  if (rc)
    return rc;
  /* Engine signals count requests (or per-pod percents the HPA averages): they add up over pods.
   * An engine profile says its own aggregation. */
  if (t.engine && !md_get(md, n, "aggregation") &&
      !(md_get(md, n, "profile") && !md_get(md, n, "metricType")))
    t.agg = AGG_SUM;
  if (t.engine) /* a GPU profile's metric must not linger (its memory warning, say) */
    t.metric = GF_GPU_UTIL;
  if ((v = md_get(md, n, "activationThreshold"))) {
    if (parse_number(v, &t.activation) || t.activation < 0)
      return bad(err, errlen, "activationThreshold", v, "must be a finite number >= 0");
  }
  if ((v = md_get(md, n, "aggregation"))) {
    if (aggregation_parse(v, &t.agg)) {
      snprintf(rule, sizeof rule, "allowed: %s", aggregation_allowed());
      return bad(err, errlen, "aggregation", v, rule);
    }
  }
  if ((v = md_get(md, n, "gpuIndex")) && parse_gpu_index(v, &t, err, errlen))
    return GS_EINVAL;
  if ((v = md_get(md, n, "window"))) {
    if (duration_parse_ms(v, &t.window_ms) || t.window_ms > WINDOW_MAX_MS)
      return bad(err, errlen, "window", v,
                 "must be a duration greater than 0 and at most 24h, e.g. \"30s\" or \"2m\"");
  }
  if ((v = md_get(md, n, "metricName"))) {
    if (!valid_metric_name(v))
      return bad(err, errlen, "metricName", v,
                 "must be 1..99 characters of letters, digits, '-', '_' or '.'");
    snprintf(t.metric_name, sizeof t.metric_name, "%s", v);
  }
  if (check_engine_keys(md, n, &t, err, errlen) || parse_model_keys(md, n, &t, err, errlen) ||
      parse_max_num_seqs(md, n, &t, err, errlen) || parse_quantile(md, n, &t, err, errlen) ||
      parse_prefill_floor(md, n, &t, err, errlen))
    return GS_EINVAL;
  /* Last, so that an error above never leaves a compiled regex behind. */
  int grc = parse_gateway_keys(md, n, ref_ns, &t, err, errlen);
  if (grc)
    return grc == GS_ENOMEM ? GS_ENOMEM : GS_EINVAL;
  if (!t.metric_name[0]) {
    /* Kubernetes-friendly default: gpuscale-memory-used-percent */
    int w = snprintf(t.metric_name, sizeof t.metric_name, "gpuscale-%s", trigger_metric_label(&t));
    for (int i = 0; i < w && t.metric_name[i]; i++)
      if (t.metric_name[i] == '_')
        t.metric_name[i] = '-';
  }
  *out = t;
  return 0;
}

const char *trigger_metric_label(const struct trigger *t) {
  return t->engine ? engine_signal_name(t->esignal) : gpu_field_name(t->metric);
}

bool trigger_flat_metric(enum gpu_field metric) {
  return metric == GF_MEM_USED_PCT || metric == GF_MEM_USED_MIB;
}

bool trigger_workload_warning(enum gpu_field metric, enum trigger_scope scope, char *buf,
                              size_t len) {
  if (scope != TRIGGER_SCOPE_WORKLOAD || !trigger_flat_metric(metric))
    return false;
  snprintf(buf, len,
           "%s in workload scope: GPU memory does not fall when replicas are added (vLLM and TGI "
           "reserve it at start), so each pod keeps its value and AverageValue grows the "
           "workload to maxReplicaCount (or shrinks it to minReplicaCount) whatever the load; "
           "scale on gpu_utilization or an engine signal (docs/profiles.md, \"Load-insensitive "
           "metrics\")",
           gpu_field_name(metric));
  return true;
}
