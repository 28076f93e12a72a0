/* A small SVG writer: escaped text, a heatmap, a horizontal bar chart and a time-series line chart,
 * each one self-contained <svg> element (no ids, no scripts) so several can share one HTML page. */
#include "rightsize/svg.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "core/err.h"

#define SVG_W 960.0 /* every chart is this wide in user units; it scales with the page */
#define SVG_FONT "font-family=\"system-ui,-apple-system,'Segoe UI',Roboto,sans-serif\""
#define GAP_COLOR "#d4d4d4"
#define AXIS_COLOR "#888888"
#define GRID_COLOR "#e6e6e6"
#define TEXT_COLOR "#333333"

void svg_outf(struct svg_out *o, const char *fmt, ...) {
  if (o->rc)
    return;
  va_list ap;
  va_start(ap, fmt);
  o->rc = buf_vprintf(o->b, fmt, ap);
  va_end(ap);
}

void svg_outs(struct svg_out *o, const char *s) {
  if (!o->rc)
    o->rc = buf_puts(o->b, s);
}

void svg_outesc(struct svg_out *o, const char *s) {
  if (!o->rc)
    o->rc = svg_escape(o->b, s);
}

/* ---- escaping ------------------------------------------------------------------------------ */

/* Length of the valid, XML-allowed UTF-8 sequence at s (at most n bytes), or 0 if there is none. */
static size_t utf8_len(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  size_t len;
  unsigned cp;
  if (c < 0x80)
    return 1;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (len > n)
    return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80)
      return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
    return 0; /* overlong or beyond Unicode */
  if ((cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFFFE || cp == 0xFFFF)
    return 0; /* surrogates and non-characters are not allowed in XML */
  return len;
}

int svg_escape_n(struct buf *b, const char *s, size_t n) {
  if (!s)
    return 0;
  const unsigned char *p = (const unsigned char *)s;
  size_t run = 0; /* bytes at p[i - run .. i) that need no escaping */
  for (size_t i = 0; i < n;) {
    unsigned c = p[i];
    const char *rep = NULL;
    size_t adv = 1;
    switch (c) {
    case '&': rep = "&amp;"; break;
    case '<': rep = "&lt;"; break;
    case '>': rep = "&gt;"; break;
    case '"': rep = "&quot;"; break;
    case '\'': rep = "&#39;"; break;
    default:
      if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F) {
        rep = "\xEF\xBF\xBD";
      } else if (c >= 0x80) {
        adv = utf8_len(p + i, n - i);
        if (!adv) {
          rep = "\xEF\xBF\xBD";
          adv = 1;
        }
      }
    }
    if (!rep) {
      run += adv;
      i += adv;
      continue;
    }
    int rc = buf_append(b, p + i - run, run);
    if (!rc)
      rc = buf_puts(b, rep);
    if (rc)
      return rc;
    run = 0;
    i += adv;
  }
  return buf_append(b, p + n - run, run);
}

int svg_escape(struct buf *b, const char *s) {
  return s ? svg_escape_n(b, s, strlen(s)) : 0;
}

/* Writes at most max_chars code points of s, escaped, with "…" when cut. Cuts only at code-point
 * boundaries, so a truncated label stays valid UTF-8. */
static void outesc_trunc(struct svg_out *o, const char *s, size_t max_chars) {
  if (!s || o->rc)
    return;
  size_t n = strlen(s), i = 0, chars = 0;
  while (i < n && chars < max_chars) {
    size_t l = utf8_len((const unsigned char *)s + i, n - i);
    i += l ? l : 1;
    chars++;
  }
  o->rc = svg_escape_n(o->b, s, i);
  if (i < n)
    svg_outs(o, "\xE2\x80\xA6");
}

/* ---- shared pieces ------------------------------------------------------------------------- */

void svg_format_time(int64_t t, char *out, size_t len) {
  struct tm tm;
  time_t tt = (time_t)t;
  if (!len)
    return;
  if (!gmtime_r(&tt, &tm)) {
    snprintf(out, len, "?");
    return;
  }
  snprintf(out, len, "%04d-%02d-%02d %02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
           tm.tm_hour, tm.tm_min);
}

/* Pale yellow (idle) through green and blue to dark navy (busy): readable in print and for the
 * common forms of colour blindness, and far from the "no data" grey. */
static const unsigned char scale[][3] = {
    {0xff, 0xff, 0xd9}, {0xc7, 0xe9, 0xb4}, {0x41, 0xb6, 0xc4},
    {0x22, 0x5e, 0xa8}, {0x08, 0x1d, 0x58},
};
#define NSCALE (sizeof scale / sizeof scale[0])

void svg_color(double v, double vmin, double vmax, char out[8]) {
  if (isnan(v) || !(vmax > vmin)) {
    memcpy(out, GAP_COLOR, 8);
    return;
  }
  double f = (v - vmin) / (vmax - vmin);
  if (f < 0)
    f = 0;
  if (f > 1)
    f = 1;
  /* Quantise to 20 levels so neighbouring cells of nearly equal value merge into one rectangle. */
  f = round(f * 20) / 20;
  double pos = f * (double)(NSCALE - 1);
  size_t k = (size_t)pos;
  if (k >= NSCALE - 1)
    k = NSCALE - 2;
  double w = pos - (double)k;
  unsigned rgb[3];
  for (int i = 0; i < 3; i++)
    rgb[i] = (unsigned)lround(scale[k][i] * (1 - w) + scale[k + 1][i] * w);
  snprintf(out, 8, "#%02x%02x%02x", rgb[0] & 0xff, rgb[1] & 0xff, rgb[2] & 0xff);
}

static const char *const palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                      "#9467bd", "#8c564b", "#e377c2", "#17becf"};

static void svg_open(struct svg_out *o, double h, const char *title) {
  svg_outf(o,
           "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %.0f %.0f\" width=\"100%%\" "
           "role=\"img\" " SVG_FONT " font-size=\"11\" fill=\"" TEXT_COLOR "\"",
           SVG_W, h);
  if (title) {
    svg_outs(o, " aria-label=\"");
    svg_outesc(o, title);
    svg_outs(o, "\"><title>");
    svg_outesc(o, title);
    svg_outs(o, "</title>");
  } else {
    svg_outs(o, ">");
  }
  svg_outs(o, "\n");
}

static void caption(struct svg_out *o, const char *title) {
  if (!title)
    return;
  svg_outs(o, "<text x=\"0\" y=\"14\" font-size=\"13\" font-weight=\"600\">");
  svg_outesc(o, title);
  svg_outs(o, "</text>\n");
}

/* Picks a tick spacing that gives at most about 8 labelled ticks over span seconds. */
static int64_t tick_step(int64_t span) {
  static const int64_t steps[] = {300,        900,        1800,       3600,       3 * 3600,
                                  6 * 3600,   12 * 3600,  86400,      2 * 86400,  7 * 86400,
                                  14 * 86400, 30 * 86400, 91 * 86400, 365 * 86400};
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
    if (span / steps[i] <= 8)
      return steps[i];
  return span / 8 + 1;
}

/* Vertical time ticks and labels under a plot spanning x0..x1 for times t0..t1, at y (axis). */
static void time_axis(struct svg_out *o, double x0, double x1, double ytop, double y, int64_t t0,
                      int64_t t1) {
  if (t1 <= t0)
    return;
  int64_t st = tick_step(t1 - t0);
  int64_t first = (t0 / st + (t0 % st != 0)) * st;
  svg_outf(o,
           "<g stroke=\"" AXIS_COLOR "\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>",
           x0, y, x1, y);
  for (int64_t t = first; t <= t1; t += st) {
    double x = x0 + (x1 - x0) * (double)(t - t0) / (double)(t1 - t0);
    svg_outf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"" GRID_COLOR "\"/>",
             x, ytop, x, y);
    svg_outf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", x, y, x, y + 4);
  }
  svg_outs(o, "</g>\n<g font-size=\"10\" text-anchor=\"middle\">");
  for (int64_t t = first; t <= t1; t += st) {
    double x = x0 + (x1 - x0) * (double)(t - t0) / (double)(t1 - t0);
    char ts[32];
    svg_format_time(t, ts, sizeof ts);
    /* Whole days show the date only; finer ticks show "MM-DD HH:MM". */
    const char *label = st % 86400 == 0 ? ts : ts + 5;
    if (st % 86400 == 0)
      ts[10] = '\0';
    svg_outf(o, "<text x=\"%.1f\" y=\"%.1f\">%s</text>", x, y + 15, label);
  }
  svg_outs(o, "</g>\n");
}

/* ---- heatmap ------------------------------------------------------------------------------- */

static double heat_row_height(size_t rows) {
  if (rows <= 40)
    return 16;
  if (rows <= 120)
    return 10;
  if (rows <= 300)
    return 5;
  return 2;
}

static void heat_legend(struct svg_out *o, const struct svg_heatmap *h, double lx, double y) {
  double lw = 200, n = 20;
  for (int i = 0; i < (int)n; i++) {
    char col[8];
    svg_color(h->vmin + (h->vmax - h->vmin) * (i + 0.5) / n, h->vmin, h->vmax, col);
    svg_outf(o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.2f\" height=\"10\" fill=\"%s\"/>",
             lx + lw * i / n, y, lw / n + 0.3, col);
  }
  svg_outf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g", lx - 4, y + 9, h->vmin);
  svg_outesc(o, h->unit);
  svg_outf(o, "</text><text x=\"%.1f\" y=\"%.1f\">%g", lx + lw + 4, y + 9, h->vmax);
  svg_outesc(o, h->unit);
  svg_outf(o,
           "</text><rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"10\" fill=\"" GAP_COLOR
           "\"/><text x=\"%.1f\" y=\"%.1f\">no data (a gap, never counted as idle)</text>\n",
           lx + lw + 50, y, lx + lw + 68, y + 9);
}

int svg_heatmap(struct buf *b, const struct svg_heatmap *h) {
  if (!h || !h->rows || !h->cols || !h->values || !(h->vmax > h->vmin) || h->step <= 0)
    return GS_EINVAL;
  struct svg_out o = {b, 0};
  const double lw = 190, top = h->title ? 24 : 4, right = 10;
  const double rh = heat_row_height(h->rows);
  const double pw = SVG_W - lw - right, ph = rh * (double)h->rows;
  const double height = top + ph + 24 + 22;
  svg_open(&o, height, h->title);
  caption(&o, h->title);
  /* Labels are drawn only when a row is tall enough to read them. */
  if (h->row_labels && rh >= 10) {
    svg_outf(&o, "<g font-size=\"%.0f\" text-anchor=\"end\">", rh - 5);
    for (size_t r = 0; r < h->rows; r++) {
      if (!h->row_labels[r])
        continue;
      svg_outf(&o, "<text x=\"%.1f\" y=\"%.1f\">", lw - 6, top + rh * (double)r + rh - 4);
      outesc_trunc(&o, h->row_labels[r], 30);
      svg_outs(&o, "</text>");
    }
    svg_outs(&o, "</g>\n");
  }
  svg_outs(&o, "<g shape-rendering=\"crispEdges\">");
  for (size_t r = 0; r < h->rows && !o.rc; r++) {
    const double *row = h->values + r * h->cols;
    size_t c0 = 0;
    char col0[8];
    svg_color(row[0], h->vmin, h->vmax, col0);
    for (size_t c = 1; c <= h->cols; c++) {
      char col[8] = "";
      if (c < h->cols) {
        svg_color(row[c], h->vmin, h->vmax, col);
        if (!strcmp(col, col0))
          continue;
      }
      double x0 = lw + pw * (double)c0 / (double)h->cols;
      double x1 = lw + pw * (double)c / (double)h->cols;
      svg_outf(&o, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"/>", x0,
               top + rh * (double)r, x1 - x0, rh, col0);
      c0 = c;
      memcpy(col0, col, sizeof col0);
    }
  }
  svg_outs(&o, "</g>\n");
  time_axis(&o, lw, lw + pw, top, top + ph, h->t0, h->t0 + h->step * (int64_t)h->cols);
  heat_legend(&o, h, lw + 30, top + ph + 26);
  svg_outs(&o, "</svg>\n");
  return o.rc;
}

/* ---- bar chart ----------------------------------------------------------------------------- */

int svg_barchart(struct buf *b, const struct svg_barchart *c) {
  if (!c || (c->n && !c->bars))
    return GS_EINVAL;
  struct svg_out o = {b, 0};
  const double lw = 300, tw = 130, top = c->title ? 26 : 4, bh = 18, gap = 6;
  const double pw = SVG_W - lw - tw;
  const double height = top + (double)(c->n ? c->n : 1) * (bh + gap) + 4;
  double vmax = 0;
  for (size_t i = 0; i < c->n; i++)
    if (c->bars[i].value > vmax)
      vmax = c->bars[i].value;
  svg_open(&o, height, c->title);
  caption(&o, c->title);
  if (!c->n) {
    svg_outf(&o, "<text x=\"%.1f\" y=\"%.1f\" fill=\"" AXIS_COLOR "\">nothing to show</text>\n", lw,
             top + 14);
  }
  for (size_t i = 0; i < c->n && !o.rc; i++) {
    const struct svg_bar *bar = &c->bars[i];
    double y = top + (double)i * (bh + gap);
    double w = (bar->value > 0 && vmax > 0) ? pw * bar->value / vmax : 0;
    svg_outs(&o, "<g>");
    if (bar->label) {
      svg_outs(&o, "<title>");
      svg_outesc(&o, bar->label);
      svg_outs(&o, "</title>");
      svg_outf(&o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">", lw - 8, y + bh - 5);
      outesc_trunc(&o, bar->label, 44);
      svg_outs(&o, "</text>");
    }
    svg_outf(&o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"", lw, y, w,
             bh);
    svg_outesc(&o, bar->color ? bar->color : "#2b8cbe");
    svg_outf(&o, "\"/><text x=\"%.1f\" y=\"%.1f\">", lw + w + 6, y + bh - 5);
    if (bar->text)
      svg_outesc(&o, bar->text);
    else
      svg_outf(&o, "%.0f", isfinite(bar->value) ? bar->value : 0.0);
    svg_outs(&o, "</text></g>\n");
  }
  svg_outs(&o, "</svg>\n");
  return o.rc;
}

/* ---- line chart ---------------------------------------------------------------------------- */

static void line_path(struct svg_out *o, const struct svg_linechart *c, const struct svg_series *s,
                      const char *color, double x0, double pw, double y0, double ph, size_t npts) {
  svg_outs(o, "<path fill=\"none\" stroke-width=\"1.5\" stroke-linejoin=\"round\" "
              "stroke-linecap=\"round\" stroke=\"");
  svg_outesc(o, color);
  svg_outs(o, "\" d=\"");
  size_t piece = 0; /* points in the current unbroken piece of line */
  for (size_t i = 0; i <= s->n && !o->rc; i++) {
    double v = i < s->n ? s->y[i] : NAN;
    if (!isfinite(v)) {
      if (piece == 1)
        svg_outs(o, "h0.5"); /* a lone point between gaps: draw a dot so it is not lost */
      piece = 0;
      continue;
    }
    if (v < c->ymin)
      v = c->ymin;
    if (v > c->ymax)
      v = c->ymax;
    double x = x0 + (npts > 1 ? pw * (double)i / (double)(npts - 1) : pw / 2);
    double y = y0 + ph - ph * (v - c->ymin) / (c->ymax - c->ymin);
    svg_outf(o, "%s%.1f %.1f", piece ? "L" : "M", x, y);
    piece++;
  }
  svg_outs(o, "\"/>\n");
}

int svg_linechart(struct buf *b, const struct svg_linechart *c) {
  if (!c || !(c->ymax > c->ymin) || c->step <= 0 || (c->nseries && !c->series))
    return GS_EINVAL;
  for (size_t i = 0; i < c->nseries; i++)
    if (c->series[i].n && !c->series[i].y)
      return GS_EINVAL;
  struct svg_out o = {b, 0};
  const double x0 = 52, right = 12, ph = 130;
  /* The legend is right-aligned on the caption's line, or on a line of its own below it when the
   * caption (13 px, about 7.5 units a character) would run into it. */
  double lx = SVG_W - right - 190.0 * (double)c->nseries;
  bool own_line = c->title && 7.5 * (double)strlen(c->title) + 16 > lx;
  const double ly = own_line ? 22 : 0, top = 30 + ly;
  const double pw = SVG_W - x0 - right, height = top + ph + 24;
  size_t npts = 0;
  for (size_t i = 0; i < c->nseries; i++)
    if (c->series[i].n > npts)
      npts = c->series[i].n;
  svg_open(&o, height, c->title);
  caption(&o, c->title);
  for (size_t i = 0; i < c->nseries; i++) {
    const struct svg_series *s = &c->series[i];
    const char *color = s->color ? s->color : palette[i % (sizeof palette / sizeof palette[0])];
    svg_outf(&o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"4\" fill=\"",
             lx + 190.0 * (double)i, 6 + ly);
    svg_outesc(&o, color);
    svg_outf(&o, "\"/><text x=\"%.1f\" y=\"%.1f\">", lx + 190.0 * (double)i + 18, 12 + ly);
    outesc_trunc(&o, s->name ? s->name : "", 28);
    svg_outs(&o, "</text>\n");
  }
  /* Horizontal grid with y labels at 0, 25, 50, 75 and 100% of the range. */
  svg_outs(&o, "<g font-size=\"10\" text-anchor=\"end\">");
  for (int k = 0; k <= 4; k++) {
    double y = top + ph - ph * k / 4.0;
    svg_outf(&o,
             "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"" GRID_COLOR "\"/>"
             "<text x=\"%.1f\" y=\"%.1f\">%g",
             x0, y, x0 + pw, y, x0 - 6, y + 3, c->ymin + (c->ymax - c->ymin) * k / 4.0);
    svg_outesc(&o, c->y_unit);
    svg_outs(&o, "</text>");
  }
  svg_outs(&o, "</g>\n");
  int64_t span = c->step * (int64_t)(npts > 1 ? npts - 1 : 1);
  time_axis(&o, x0, x0 + pw, top, top + ph, c->t0, c->t0 + span);
  for (size_t i = 0; i < c->nseries; i++) {
    const struct svg_series *s = &c->series[i];
    const char *color = s->color ? s->color : palette[i % (sizeof palette / sizeof palette[0])];
    line_path(&o, c, s, color, x0, pw, top, ph, npts);
  }
  svg_outs(&o, "</svg>\n");
  return o.rc;
}
