/* A small SVG writer for the rightsize HTML report: text escaping, a heatmap, a bar chart and a
 * time-series line chart, each written as one self-contained <svg> element into a struct buf. */
#ifndef GS_SVG_H
#define GS_SVG_H

#include <stddef.h>
#include <stdint.h>

struct buf;

/* Appends s with &, <, >, " and ' escaped, so the result is safe both as HTML/XML text and inside
 * a quoted attribute. Bytes that XML forbids (control characters other than tab, newline and
 * carriage return) and invalid UTF-8 come out as U+FFFD. NULL appends nothing. Returns 0 or the
 * buf_append error (GS_ETOOBIG, GS_ENOMEM); on error part of s may have been appended. */
int svg_escape(struct buf *b, const char *s);

/* A sticky-error writer: after the first failure every later write is skipped, so chart and page
 * code reads straight through and checks rc once at the end. */
struct svg_out {
  struct buf *b;
  int rc; /* 0, or the first buf error */
};
void svg_outf(struct svg_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void svg_outs(struct svg_out *o, const char *s);
/* Appends s escaped for XML text and attribute values. */
void svg_outesc(struct svg_out *o, const char *s);
/* The same, for the first n bytes of s (which need not be NUL-terminated). */
int svg_escape_n(struct buf *b, const char *s, size_t n);

/* Formats a UTC time (seconds since the epoch) as "YYYY-MM-DD HH:MM" into out (at least 17
 * bytes; shorter buffers get a truncated string). */
void svg_format_time(int64_t t, char *out, size_t len);

/* Colour of a utilisation value on the heatmap's scale (vmin..vmax, clamped) as "#rrggbb" into
 * out (8 bytes). NaN gives the "no data" grey. Exposed so the report's legend and tables match. */
void svg_color(double v, double vmin, double vmax, char out[8]);

/* A grid of rows x cols cells, row-major values; NaN draws a "no data" cell (a gap is never
 * drawn as idle). Equal neighbouring cells are merged, so an idle week is one rectangle. */
struct svg_heatmap {
  const char *title;             /* accessible title and caption; may be NULL */
  size_t rows, cols;             /* both > 0 */
  const char *const *row_labels; /* rows labels (may be NULL, or contain NULLs) */
  const double *values;          /* rows * cols */
  double vmin, vmax;             /* colour scale; vmax > vmin */
  const char *unit;              /* legend unit, e.g. "%"; may be NULL */
  int64_t t0;                    /* start of column 0, seconds since the epoch (UTC) */
  int64_t step;                  /* seconds per column, > 0 */
};
/* Appends one <svg> element. Returns 0, GS_EINVAL for a malformed description, or a buf error. */
int svg_heatmap(struct buf *b, const struct svg_heatmap *h);

/* One horizontal bar. */
struct svg_bar {
  const char *label; /* left of the bar; may be NULL */
  double value;      /* >= 0; negative and NaN values draw no bar */
  const char *text;  /* right of the bar (e.g. "$1,234/mo"); NULL prints the value with %.0f */
  const char *color; /* "#rrggbb"; NULL for the default */
};
struct svg_barchart {
  const char *title; /* may be NULL */
  const struct svg_bar *bars;
  size_t n; /* may be 0: an empty chart that says "nothing to show" */
};
/* Appends one <svg> element. Returns 0, GS_EINVAL or a buf error. */
int svg_barchart(struct buf *b, const struct svg_barchart *c);

/* One line: n points at t0 + i * step; NaN points break the line (a gap, not a zero). */
struct svg_series {
  const char *name; /* legend; may be NULL */
  const double *y;  /* n values */
  size_t n;
  const char *color; /* "#rrggbb"; NULL picks from a palette */
};
struct svg_linechart {
  const char *title;  /* may be NULL */
  const char *y_unit; /* axis unit, e.g. "%"; may be NULL */
  double ymin, ymax;  /* y range; ymax > ymin */
  int64_t t0, step;   /* time of point 0 (UTC seconds) and seconds per point, > 0 */
  const struct svg_series *series;
  size_t nseries;
};
/* Appends one <svg> element. Returns 0, GS_EINVAL or a buf error. */
int svg_linechart(struct buf *b, const struct svg_linechart *c);

#endif
