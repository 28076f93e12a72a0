/* Unit tests for the SVG writer and the HTML report: escaping (a pod named <script> comes out as
 * text), well-formed chart and page markup (a small XML checker here, and Python's minidom when
 * /usr/bin/python3 exists), gap drawing, size caps and bounded output for 1000 GPUs. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "core/buf.h"
#include "core/err.h"
#include "rightsize/model.h"
#include "rightsize/report.h"
#include "rightsize/svg.h"
#include "test_rs_names.h"

#define EVIL_POD "<script>alert(1)</script>"
#define EVIL_POD_ESC "&lt;script&gt;alert(1)&lt;/script&gt;"

/* ---- a small XML well-formedness checker ---------------------------------------------------- */

/* Checks tag nesting, quoted attributes, and that every '&' starts one of the XML entities or a
 * character reference. Returns NULL when well-formed, else a static description. */
static const char *xml_check(const char *s) {
  const char *stack[256];
  size_t depth = 0, roots = 0;
  size_t nlen[256];
  while (*s) {
    if (*s == '&') {
      static const char *const ents[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
      int ok = 0;
      for (size_t i = 0; i < 5; i++)
        ok |= !strncmp(s, ents[i], strlen(ents[i]));
      if (!ok && s[1] == '#') {
        const char *p = s + 2;
        int hex = *p == 'x';
        p += hex;
        const char *d = p;
        while (hex ? (*p && strchr("0123456789abcdefABCDEF", *p)) : (*p >= '0' && *p <= '9'))
          p++;
        ok = p > d && *p == ';';
      }
      if (!ok)
        return "bare '&'";
      s++;
      continue;
    }
    if (*s != '<') {
      s++;
      continue;
    }
    if (!strncmp(s, "<!--", 4)) {
      const char *e = strstr(s, "-->");
      if (!e)
        return "unterminated comment";
      s = e + 3;
      continue;
    }
    if (s[1] == '!' || s[1] == '?') {
      const char *e = strchr(s, '>');
      if (!e)
        return "unterminated declaration";
      s = e + 1;
      continue;
    }
    if (s[1] == '/') {
      const char *n = s + 2;
      size_t l = strcspn(n, " \t\n>");
      if (!depth || l != nlen[depth - 1] || strncmp(n, stack[depth - 1], l))
        return "mismatched end tag";
      depth--;
      s = n + l;
      while (*s == ' ' || *s == '\n')
        s++;
      if (*s != '>')
        return "bad end tag";
      s++;
      continue;
    }
    const char *n = s + 1;
    size_t l = strcspn(n, " \t\n/>");
    if (!l)
      return "empty tag name";
    s = n + l;
    for (;;) {
      while (*s == ' ' || *s == '\n' || *s == '\t')
        s++;
      if (*s == '>' || (s[0] == '/' && s[1] == '>'))
        break;
      size_t al = strcspn(s, "= \t\n/>");
      if (!al || s[al] != '=' || (s[al + 1] != '"' && s[al + 1] != '\''))
        return "attribute without a quoted value";
      char q = s[al + 1];
      const char *e = strchr(s + al + 2, q);
      if (!e)
        return "unterminated attribute";
      if (memchr(s + al + 2, '<', (size_t)(e - (s + al + 2))))
        return "'<' in an attribute";
      for (const char *a = s + al + 2; a < e; a++)
        if (*a == '&' && strncmp(a, "&amp;", 5) && strncmp(a, "&lt;", 4) && strncmp(a, "&gt;", 4) &&
            strncmp(a, "&quot;", 6) && strncmp(a, "&#", 2))
          return "bare '&' in an attribute";
      s = e + 1;
    }
    if (*s == '/') {
      s += 2;
      if (!depth)
        roots++;
      continue;
    }
    if (depth == 256)
      return "too deep";
    if (!depth)
      roots++;
    stack[depth] = n;
    nlen[depth++] = l;
    s++;
  }
  if (depth)
    return "unclosed element";
  if (!roots)
    return "no element";
  return NULL;
}

/* Parses text with Python's xml.dom.minidom (an independent parser). 0 when well-formed or when
 * Python is missing; otherwise the exit status. */
static int minidom_check(const char *text) {
  if (access("/usr/bin/python3", X_OK) != 0)
    return 0;
  FILE *p = popen("/usr/bin/python3 -c 'import sys, xml.dom.minidom; "
                  "xml.dom.minidom.parseString(sys.stdin.buffer.read())'",
                  "w");
  if (!p)
    return 0;
  fwrite(text, 1, strlen(text), p);
  return pclose(p);
}

static void assert_well_formed(const char *text) {
  const char *err = xml_check(text);
  if (err)
    fail_msg("not well-formed: %s", err);
  assert_int_equal(minidom_check(text), 0);
}

static size_t count(const char *hay, const char *needle) {
  size_t n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
    n++;
  return n;
}

/* ---- escaping ------------------------------------------------------------------------------ */

struct esc_case {
  const char *in;
  const char *out;
};

static const struct esc_case esc_cases[] = {
    {"", ""},
    {"plain-pod-7d9f", "plain-pod-7d9f"},
    {EVIL_POD, EVIL_POD_ESC},
    {"a&b", "a&amp;b"},
    {"\"q\" 'a'", "&quot;q&quot; &#39;a&#39;"},
    {"</svg><svg onload=x>", "&lt;/svg&gt;&lt;svg onload=x&gt;"},
    {"tab\tnl\ncr\r", "tab\tnl\ncr\r"},
    {"bell\x07", "bell\xEF\xBF\xBD"},
    {"del\x7F", "del\xEF\xBF\xBD"},
    {"caf\xC3\xA9 \xE6\x97\xA5 \xF0\x9F\x9A\x80", "caf\xC3\xA9 \xE6\x97\xA5 \xF0\x9F\x9A\x80"},
    {"bad\xFF", "bad\xEF\xBF\xBD"},
    {"cut\xE6\x97", "cut\xEF\xBF\xBD\xEF\xBF\xBD"},                 /* truncated sequence */
    {"over\xC0\xAF", "over\xEF\xBF\xBD\xEF\xBF\xBD"},               /* overlong '/' */
    {"sur\xED\xA0\x80", "sur\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* UTF-16 surrogate */
    {"nc\xEF\xBF\xBF", "nc\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},   /* U+FFFF */
};

static void test_escape_table(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof esc_cases / sizeof esc_cases[0]; i++) {
    struct buf b;
    buf_init(&b, 1024);
    assert_int_equal(svg_escape(&b, esc_cases[i].in), 0);
    if (strcmp(b.data ? b.data : "", esc_cases[i].out))
      fail_msg("case %zu: got '%s' want '%s'", i, b.data ? b.data : "", esc_cases[i].out);
    buf_free(&b);
  }
}

static void test_escape_n_and_cap(void **state) {
  (void)state;
  struct buf b;
  buf_init(&b, 1024);
  assert_int_equal(svg_escape_n(&b, "a<b\0<c", 6), 0);
  assert_int_equal(b.len, strlen("a&lt;b\xEF\xBF\xBD&lt;c"));
  assert_memory_equal(b.data, "a&lt;b\xEF\xBF\xBD&lt;c", b.len);
  assert_int_equal(svg_escape(&b, NULL), 0);
  buf_free(&b);
  buf_init(&b, 8);
  assert_int_equal(svg_escape(&b, "<<<<"), GS_ETOOBIG);
  buf_free(&b);
}

/* ---- charts -------------------------------------------------------------------------------- */

static void test_heatmap(void **state) {
  (void)state;
  enum { R = 3, C = 48 };
  double v[R * C];
  const char *labels[R] = {"idle-node gpu0", "busy " EVIL_POD, NULL};
  for (int c = 0; c < C; c++) {
    v[0 * C + c] = 0;                 /* idle all along: one rectangle */
    v[1 * C + c] = (c * 37) % 101;    /* varied */
    v[2 * C + c] = c < 24 ? 50 : NAN; /* half, then a gap */
  }
  struct svg_heatmap h = {"util <heat>", R, C, labels, v, 0, 100, "%", 1700000000, 3600};
  struct buf b;
  buf_init(&b, 1u << 20);
  assert_int_equal(svg_heatmap(&b, &h), 0);
  assert_well_formed(b.data);
  assert_null(strstr(b.data, "<script"));
  assert_non_null(strstr(b.data, EVIL_POD_ESC));
  assert_non_null(strstr(b.data, "util &lt;heat&gt;"));
  char idle[8], gap[8];
  svg_color(0, 0, 100, idle);
  svg_color(NAN, 0, 100, gap);
  assert_string_not_equal(idle, gap); /* a gap never looks idle */
  char want[64];
  snprintf(want, sizeof want, "fill=\"%s\"", gap);
  assert_non_null(strstr(b.data, want));
  /* Row 0 is one rectangle and row 2 two; row 1 at most C. Legend adds 20 + 1. */
  size_t rects = count(b.data, "<rect");
  assert_true(rects >= 1 + 2 + 2 + 21 && rects <= 1 + C + 2 + 21);
  buf_free(&b);

  buf_init(&b, 1u << 20);
  struct svg_heatmap bad = h;
  bad.vmax = bad.vmin;
  assert_int_equal(svg_heatmap(&b, &bad), GS_EINVAL);
  bad = h;
  bad.rows = 0;
  assert_int_equal(svg_heatmap(&b, &bad), GS_EINVAL);
  bad = h;
  bad.step = 0;
  assert_int_equal(svg_heatmap(&b, &bad), GS_EINVAL);
  assert_int_equal(svg_heatmap(&b, NULL), GS_EINVAL);
  buf_free(&b);
}

static void test_barchart(void **state) {
  (void)state;
  struct svg_bar bars[] = {
      {"drain node-a", 12345.5, "$12,345.50/mo", "#d62728"},
      {EVIL_POD, 10, NULL, NULL},
      {"negative", -5, NULL, NULL},
      {NULL, NAN, NULL, "\"><script>"},
  };
  struct svg_barchart c = {"savings & more", bars, 4};
  struct buf b;
  buf_init(&b, 1u << 20);
  assert_int_equal(svg_barchart(&b, &c), 0);
  assert_well_formed(b.data);
  assert_null(strstr(b.data, "<script"));
  assert_non_null(strstr(b.data, "$12,345.50/mo"));
  assert_non_null(strstr(b.data, "savings &amp; more"));
  assert_non_null(strstr(b.data, ">10</text>"));
  buf_reset(&b);
  struct svg_barchart empty = {NULL, NULL, 0};
  assert_int_equal(svg_barchart(&b, &empty), 0);
  assert_well_formed(b.data);
  assert_non_null(strstr(b.data, "nothing to show"));
  struct svg_barchart bad = {NULL, NULL, 2};
  assert_int_equal(svg_barchart(&b, &bad), GS_EINVAL);
  buf_free(&b);
}

static void test_linechart_gaps(void **state) {
  (void)state;
  double u[] = {10, 20, NAN, NAN, 30, 40, NAN, 50, NAN};
  double m[] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  struct svg_series s[] = {{"util", u, 9, NULL}, {"mem <MiB>", m, 9, "#ff7f0e"}};
  struct svg_linechart c = {"node-a", "%", 0, 100, 1700000000, 300, s, 2};
  struct buf b;
  buf_init(&b, 1u << 20);
  assert_int_equal(svg_linechart(&b, &c), 0);
  assert_well_formed(b.data);
  /* util breaks into three pieces (two gaps); the lone point 50 is drawn as a dot. */
  const char *p1 = strstr(b.data, "<path");
  assert_non_null(p1);
  const char *end = strstr(p1, "/>");
  size_t moves = 0;
  for (const char *q = p1; q < end; q++)
    moves += *q == 'M';
  assert_int_equal(moves, 3);
  assert_non_null(strstr(p1, "h0.5"));
  assert_true(strstr(p1, "h0.5") < end);
  assert_non_null(strstr(b.data, "mem &lt;MiB&gt;"));
  assert_int_equal(count(b.data, "<path"), 2);

  struct svg_linechart bad = c;
  bad.ymax = 0;
  assert_int_equal(svg_linechart(&b, &bad), GS_EINVAL);
  struct svg_series nul = {"x", NULL, 3, NULL};
  bad = c;
  bad.series = &nul;
  bad.nseries = 1;
  assert_int_equal(svg_linechart(&b, &bad), GS_EINVAL);
  buf_free(&b);
}

static void test_time_format(void **state) {
  (void)state;
  char t[32];
  svg_format_time(0, t, sizeof t);
  assert_string_equal(t, "1970-01-01 00:00");
  svg_format_time(1700000000, t, sizeof t);
  assert_string_equal(t, "2023-11-14 22:13");
  svg_format_time(1700000000, t, 5);
  assert_string_equal(t, "2023");
}

/* ---- the whole report ---------------------------------------------------------------------- */

#define H100_HOUR (55.04 / 8)

static size_t *idx(size_t n, size_t first) {
  size_t *a = calloc(n, sizeof *a);
  assert_non_null(a);
  for (size_t i = 0; i < n; i++)
    a[i] = first + i;
  return a;
}

static void fill_timeline(struct rs_bucket *tl, size_t nb, int pattern) {
  for (size_t i = 0; i < nb; i++) {
    struct rs_bucket *bk = &tl[i];
    if (pattern == 2 && i >= nb / 3 && i < nb / 2)
      continue; /* a gap: n == 0 */
    bk->n = 6;
    bk->valid = RS_BKT_UTIL | RS_BKT_MEM | RS_BKT_MEM_PCT;
    bk->util_mean = pattern == 0 ? 0.0f : (float)(40 + (i * 7) % 50);
    bk->mem_mean_mib = pattern == 0 ? 0.0f : 30000.0f;
    bk->mem_mean_pct = pattern == 0 ? 0.0f : 37.0f;
    bk->idle_pct = pattern == 0 ? 100 : 0;
  }
}

/* Three nodes: idle (8 GPUs), busy with a hostile node name (1 GPU), one with a gap (1 GPU); a
 * pod named <script>; an idle-node and a MIG recommendation. */
static void make_report(struct rs_report *r, size_t nb) {
  rs_report_init(r);
  snprintf(r->source_url, sizeof r->source_url, "http://127.0.0.1:9090/?a=<b>&c");
  snprintf(r->price_source, sizeof r->price_source, "built-in (AWS us-east-1 on-demand, 2026)");
  r->generated_ms = 1700000000000LL;
  r->end_ms = 1700000000000LL - 3600000;
  r->start_ms = r->end_ms - r->params.window_ms;
  r->n_buckets = nb;
  r->bucket_ms = r->params.window_ms / (int64_t)nb;
  static const char *const names[] = {"gpu-idle-1", "gpu-busy-<b>x</b>", "gpu-gap-1"};
  static const size_t ngpus[] = {8, 1, 1};
  r->n_nodes = 3;
  r->nodes = calloc(3, sizeof *r->nodes);
  r->n_gpus = 10;
  r->gpus = calloc(10, sizeof *r->gpus);
  assert_non_null(r->nodes);
  assert_non_null(r->gpus);
  size_t g = 0;
  for (size_t n = 0; n < 3; n++) {
    struct rs_node *nd = &r->nodes[n];
    snprintf(nd->name, sizeof nd->name, "%s", names[n]);
    snprintf(nd->model, sizeof nd->model, "NVIDIA H100 80GB HBM3");
    nd->n_gpus = ngpus[n];
    nd->gpus = idx(nd->n_gpus, g);
    nd->valid = RS_HAS_IDLE | RS_HAS_COST;
    nd->util.valid = RS_HAS_P50 | RS_HAS_P95 | RS_HAS_MAX;
    nd->util.p95 = n == 0 ? 0 : 85;
    nd->idle_fraction = n == 0 ? 1 : 0;
    nd->hours_observed = n == 2 ? 140 : 168;
    nd->coverage = nd->hours_observed / 168;
    nd->n_gaps = n == 2;
    nd->gap_ms = n == 2 ? 28LL * 3600000 : 0;
    nd->idle_cost_window = n == 0 ? 168 * 8 * H100_HOUR : 0;
    nd->timeline = calloc(nb, sizeof *nd->timeline);
    assert_non_null(nd->timeline);
    fill_timeline(nd->timeline, nb, (int)n);
    for (size_t k = 0; k < nd->n_gpus; k++, g++) {
      struct rs_gpu *gpu = &r->gpus[g];
      gpu->node = rs_test_name(r, "%s", nd->name);
      gpu->gpu = rs_test_name(r, "%zu", k);
      gpu->node_idx = n;
      gpu->timeline = calloc(nb, sizeof *gpu->timeline);
      assert_non_null(gpu->timeline);
      fill_timeline(gpu->timeline, nb, (int)n);
    }
  }
  r->n_workloads = 1;
  r->workloads = calloc(1, sizeof *r->workloads);
  assert_non_null(r->workloads);
  r->workloads[0].namespace_ = "inference&co";
  r->workloads[0].pod = rs_test_name(r, "%s", EVIL_POD);
  r->n_recs = 2;
  r->recs = calloc(2, sizeof *r->recs);
  assert_non_null(r->recs);
  struct rs_rec *a = &r->recs[0];
  a->kind = RS_REC_IDLE_NODE;
  a->node_idx = 0;
  a->nodes = idx(1, 0);
  a->n_nodes = 1;
  a->valid = RS_REC_HAS_SAVINGS;
  a->savings_month = 55.04 * RS_HOURS_PER_MONTH;
  a->confidence = 0.97;
  a->confidence_level = RS_CONF_HIGH;
  snprintf(a->reason, RS_TEXT_MAX, "every GPU idle for 7d <= 5%% util");
  snprintf(a->evidence_text, RS_TEXT_MAX, "util p95 0 %%, idle 100 %%");
  a->evidence.valid = RS_EV_COVERAGE | RS_EV_HOURS;
  a->evidence.coverage = 1;
  a->evidence.hours_observed = 168;
  struct rs_rec *m = &r->recs[1];
  m->kind = RS_REC_MIG;
  m->workload_idx = 0;
  snprintf(m->mig_profile, RS_SHORT_MAX, "1g.10gb");
  m->share_ways = 7;
  m->valid = RS_REC_HAS_SAVINGS;
  m->savings_month = H100_HOUR * 6.0 / 7.0 * RS_HOURS_PER_MONTH;
  m->confidence = 0.6;
  m->confidence_level = RS_CONF_MEDIUM;
  snprintf(m->reason, RS_TEXT_MAX, "p95 memory fits <1g.10gb>");
  struct rs_summary *s = &r->summary;
  s->valid = RS_SUM_HAS_COST | RS_SUM_HAS_SAVINGS;
  s->n_nodes = 3;
  s->n_gpus = 10;
  s->n_workloads = 1;
  s->n_recs = 2;
  s->gpu_hours_paid = 1680;
  s->gpu_hours_used = 300;
  s->savings_month = 1234567.891;
  s->savings_month_by_kind[RS_REC_IDLE_NODE] = a->savings_month;
  s->savings_month_by_kind[RS_REC_MIG] = m->savings_month;
  s->recs_by_kind[RS_REC_IDLE_NODE] = 1;
  s->recs_by_kind[RS_REC_MIG] = 1;
  assert_int_equal(rs_report_note(r, "owner names guessed; <script>x</script>"), 0);
  rs_test_blank_names(r);
}

static void test_report_escapes_and_parses(void **state) {
  (void)state;
  struct rs_report r;
  make_report(&r, 336);
  struct buf b;
  buf_init(&b, 64u << 20);
  assert_int_equal(report_html(&r, &b), 0);
  assert_well_formed(b.data);
  /* Nothing the data said became markup: no script element, no event handler, no loads. */
  assert_null(strcasestr(b.data, "<script"));
  assert_null(strcasestr(b.data, "<b>"));
  assert_null(strstr(b.data, " src="));
  assert_null(strstr(b.data, " href="));
  assert_null(strstr(b.data, "<link"));
  assert_non_null(strstr(b.data, "inference&amp;co/" EVIL_POD_ESC));
  assert_non_null(strstr(b.data, "gpu-busy-&lt;b&gt;x&lt;/b&gt;"));
  assert_non_null(strstr(b.data, "http://127.0.0.1:9090/?a=&lt;b&gt;&amp;c"));
  assert_non_null(strstr(b.data, "default-src 'none'"));
  /* Charts: savings bars, one heatmap, a timeline per node. */
  assert_int_equal(count(b.data, "<svg"), 1 + 1 + 3);
  assert_non_null(strstr(b.data, "id=\"heatmap\""));
  assert_non_null(strstr(b.data, "$1,234,567.89"));
  assert_non_null(strstr(b.data, "$40,179.20")); /* 55.04 x 730 */
  assert_non_null(strstr(b.data, "MIG 1g.10gb (7 per GPU)"));
  assert_non_null(strstr(b.data, "high (0.97)"));
  /* The idle node's timeline comes before the busy node's (recommended nodes first). */
  assert_true(strstr(b.data, "gpu-idle-1 (8") < strstr(b.data, "gpu-busy-&lt;b&gt;x&lt;/b&gt; (1"));
  buf_free(&b);

  /* A cap too small for the page fails cleanly, with no crash and no leak. */
  buf_init(&b, 4096);
  assert_int_equal(report_html(&r, &b), GS_ETOOBIG);
  buf_free(&b);
  rs_report_free(&r);
}

static void test_report_empty(void **state) {
  (void)state;
  struct rs_report r;
  rs_report_init(&r);
  snprintf(r.currency, sizeof r.currency, "E<R");
  struct buf b;
  buf_init(&b, 1u << 20);
  assert_int_equal(report_html(&r, &b), 0);
  assert_well_formed(b.data);
  assert_non_null(strstr(b.data, "No recommendations"));
  assert_non_null(strstr(b.data, "No GPU time series"));
  buf_free(&b);
  rs_report_free(&r);
  assert_int_equal(report_html(NULL, &b), GS_EINVAL);
}

/* The JSON report is written element by element (report_json_stream); its text must be what json-c
 * writes for the whole document as one tree, which re-rendering the parsed text gives. */
static int collect(void *ud, struct buf *b) {
  return buf_append(ud, b->data, b->len);
}

static void assert_json_as_tree(const struct rs_report *r) {
  struct buf b, piece, all;
  buf_init(&b, 1u << 26);
  buf_init(&piece, 1u << 26);
  buf_init(&all, 1u << 26);
  assert_int_equal(report_json(r, &b), 0);
  struct json_object *doc = json_tokener_parse(b.data);
  assert_non_null(doc);
  const char *tree = json_object_to_json_string_ext(
      doc, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
  assert_int_equal(strlen(tree) + 1, b.len);
  assert_memory_equal(tree, b.data, b.len - 1);
  assert_int_equal(b.data[b.len - 1], '\n');
  /* streamed in pieces: the same bytes, and nothing left in the piece buffer */
  assert_int_equal(report_json_stream(r, &piece, collect, &all), 0);
  assert_int_equal(piece.len, 0);
  assert_int_equal(all.len, b.len);
  assert_memory_equal(all.data, b.data, b.len);
  json_object_put(doc);
  buf_free(&b);
  buf_free(&piece);
  buf_free(&all);
}

static void test_json_as_tree(void **state) {
  (void)state;
  struct rs_report r;
  rs_report_init(&r);
  assert_json_as_tree(&r); /* every array empty */
  rs_report_free(&r);
  make_report(&r, 48);
  assert_json_as_tree(&r);
  rs_report_free(&r);
}

struct pieces {
  struct buf all;
  int n;
  size_t largest;
};

static int count_piece(void *ud, struct buf *b) {
  struct pieces *p = ud;
  p->n++;
  p->largest = b->len > p->largest ? b->len : p->largest;
  return buf_append(&p->all, b->data, b->len);
}

/* 1000 noisy GPUs over 336 buckets: the heatmap is merged in time to stay bounded. */
static void test_report_large_bounded(void **state) {
  (void)state;
  struct rs_report r;
  make_report(&r, 336);
  struct rs_gpu *more = realloc(r.gpus, 1000 * sizeof *more);
  assert_non_null(more);
  r.gpus = more;
  for (size_t g = r.n_gpus; g < 1000; g++) {
    struct rs_gpu *gpu = &r.gpus[g];
    memset(gpu, 0, sizeof *gpu);
    gpu->node = rs_test_name(&r, "node-%04zu", g / 8);
    gpu->gpu = rs_test_name(&r, "%zu", g % 8);
    gpu->timeline = calloc(336, sizeof *gpu->timeline);
    assert_non_null(gpu->timeline);
    for (size_t i = 0; i < 336; i++) {
      gpu->timeline[i].n = 6;
      gpu->timeline[i].valid = RS_BKT_UTIL;
      gpu->timeline[i].util_mean = (float)((g * 31 + i * 17) % 101);
    }
  }
  r.n_gpus = 1000;
  rs_test_blank_names(&r);
  struct buf b;
  buf_init(&b, 64u << 20);
  assert_int_equal(report_html(&r, &b), 0);
  assert_null(xml_check(b.data));
  assert_true(b.len < 12u << 20);
  /* streamed (as rightsize writes its file): the same bytes, in pieces, none of them the page,
   * and nothing left in the piece buffer */
  struct pieces p = {.n = 0};
  struct buf piece;
  buf_init(&piece, 64u << 20);
  buf_init(&p.all, 64u << 20);
  assert_int_equal(report_html_stream(&r, &piece, count_piece, &p), 0);
  assert_int_equal(piece.len, 0);
  assert_true(p.n >= 2);
  assert_true(p.largest < b.len); /* here the heatmap, one piece: 1000 rows of 336 buckets */
  assert_int_equal(p.all.len, b.len);
  assert_memory_equal(p.all.data, b.data, b.len);
  buf_free(&piece);
  buf_free(&p.all);
  buf_free(&b);
  rs_report_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_escape_table),
      cmocka_unit_test(test_escape_n_and_cap),
      cmocka_unit_test(test_heatmap),
      cmocka_unit_test(test_barchart),
      cmocka_unit_test(test_linechart_gaps),
      cmocka_unit_test(test_time_format),
      cmocka_unit_test(test_report_escapes_and_parses),
      cmocka_unit_test(test_report_empty),
      cmocka_unit_test(test_json_as_tree),
      cmocka_unit_test(test_report_large_bounded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
