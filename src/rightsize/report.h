/* Report writers for `gpuscale rightsize`: text (terminal table), JSON (schema
 * gpuscale.rightsize/v1, docs/rightsize.md) and HTML (self-contained, inline SVG). */
#ifndef GS_RS_REPORT_H
#define GS_RS_REPORT_H

#include "core/buf.h"
#include "rightsize/model.h"

/* Appends an aligned plain-text report to out. Returns 0, GS_ETOOBIG or GS_ENOMEM. */
int report_text(const struct rs_report *r, struct buf *out);
/* Appends the JSON document (schema RS_SCHEMA) to out. Absent numbers are left out of the
 * document, never written as 0. Returns 0, GS_ETOOBIG or GS_ENOMEM. */
int report_json(const struct rs_report *r, struct buf *out);
/* The same document, handed to flush(ud, out) in pieces of about 256 KiB as it is written (out is
 * emptied after each), and a last time at its end: memory holds one piece, never the document. A
 * flush that fails stops the writing with its error. */
int report_json_stream(const struct rs_report *r, struct buf *out,
                       int (*flush)(void *ud, struct buf *b), void *ud);
/* Appends one self-contained HTML page with inline SVG charts to out (report_html.c).
 * Returns 0, GS_ETOOBIG or GS_ENOMEM. */
int report_html(const struct rs_report *r, struct buf *out);
/* The same page, handed to flush(ud, out) as it is made, whenever out passes 256 KiB between two
 * of its parts (a table row, a chart; out is emptied after each), and a last time at its end:
 * memory holds about the largest chart (the heatmap), never the page. A flush that fails stops
 * the writing with its error. */
int report_html_stream(const struct rs_report *r, struct buf *out,
                       int (*flush)(void *ud, struct buf *b), void *ud);

#endif
