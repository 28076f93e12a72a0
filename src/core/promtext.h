/* Prometheus text exposition format 0.0.4 parser, for the engine pods the agent scrapes (issue 12).
 * Also accepts OpenMetrics-style "# EOF" (nothing but blank lines may follow), float timestamps and
 * an exemplar ("# {...} v") after the value, which is skipped; _total/_created lines are plain
 * samples. HELP and TYPE lines are checked for shape (a metric name; TYPE a known type) and
 * otherwise ignored; family grouping is not checked (Prometheus' own scraper does not either).
 *
 * Per line, as the format says: [blanks] name [blanks] [ "{" label="value" {, label="value"} [,]
 * "}" ] blanks value [ blanks timestamp ] [blanks]; '\n' or "\r\n" ends it. Label values take the
 * escapes \\ \" \n and must be UTF-8 without NUL; names are [a-zA-Z_:][a-zA-Z0-9_:]* (labels
 * without ':', "__name__" reserved, no duplicates). Values: what strtod reads as a whole token,
 * so NaN, +Inf, -Inf, exponents. Capped: at most PROMTEXT_MAX_BYTES of input,
 * PROMTEXT_MAX_SAMPLES samples, PROMTEXT_MAX_LABELS labels per sample, names and label values
 * PROMTEXT_MAX_NAME / PROMTEXT_MAX_VALUE bytes. */
#ifndef GS_PROMTEXT_H
#define GS_PROMTEXT_H

#include <stddef.h>

#define PROMTEXT_MAX_BYTES (4u << 20)
#define PROMTEXT_MAX_SAMPLES 200000
#define PROMTEXT_MAX_LABELS 32
#define PROMTEXT_MAX_NAME 1024   /* metric and label names, bytes */
#define PROMTEXT_MAX_VALUE 16384 /* one label value, bytes after unescaping */

struct prom_label {
  const char *name, *value;
};
struct prom_sample {
  const char *name;
  size_t n_labels;
  const struct prom_label *labels; /* in the order of the line */
  double value;
};
/* One parsed exposition; every string is owned by the document (priv). */
struct prom_doc {
  size_t n;
  struct prom_sample *samples; /* in the order of the text */
  void *priv;
};

/* Parses len bytes of text (need not be NUL-terminated). Returns 0 and fills *out (free it with
 * promtext_free), or GS_EPARSE (err: "line N: what"), GS_ETOOBIG (a cap; err says which) or
 * GS_ENOMEM. On failure *out is zeroed and nothing is owned. err may be NULL. */
int promtext_parse(const char *text, size_t len, struct prom_doc *out, char *err, size_t errlen);
/* Releases a document and zeroes it. NULL or a zeroed document is fine. */
void promtext_free(struct prom_doc *d);
/* The value of label name on s, or NULL when s has no such label. */
const char *prom_label(const struct prom_sample *s, const char *name);

#endif
