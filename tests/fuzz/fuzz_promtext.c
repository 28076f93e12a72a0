/* libFuzzer target for promtext_parse (engine pods' /metrics). A success must be a document whose
 * names are names and whose label values are NUL-free; written back in the text format, it must
 * parse to the same samples. A failure must name its line. The engine reader runs on every
 * success, as the agent does. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/engine_read.h"
#include "core/buf.h"
#include "core/err.h"
#include "core/promtext.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int write_doc(const struct prom_doc *d, struct buf *b) {
  int rc = 0;
  for (size_t i = 0; i < d->n && !rc; i++) {
    const struct prom_sample *s = &d->samples[i];
    rc = buf_puts(b, s->name);
    if (!rc && s->n_labels)
      rc = buf_puts(b, "{");
    for (size_t j = 0; j < s->n_labels && !rc; j++) {
      rc = buf_printf(b, "%s%s=\"", j ? "," : "", s->labels[j].name);
      for (const char *v = s->labels[j].value; *v && !rc; v++)
        rc = *v == '\\'   ? buf_puts(b, "\\\\")
             : *v == '"'  ? buf_puts(b, "\\\"")
             : *v == '\n' ? buf_puts(b, "\\n")
                          : buf_append(b, v, 1);
      if (!rc)
        rc = buf_puts(b, "\"");
    }
    if (!rc && s->n_labels)
      rc = buf_puts(b, "}");
    if (!rc)
      rc = isnan(s->value)   ? buf_puts(b, " NaN\n")
           : isinf(s->value) ? buf_puts(b, s->value > 0 ? " +Inf\n" : " -Inf\n")
                             : buf_printf(b, " %.17g\n", s->value);
  }
  return rc;
}

static void same_doc(const struct prom_doc *a, const struct prom_doc *b) {
  if (a->n != b->n)
    abort();
  for (size_t i = 0; i < a->n; i++) {
    const struct prom_sample *x = &a->samples[i], *y = &b->samples[i];
    if (strcmp(x->name, y->name) || x->n_labels != y->n_labels)
      abort();
    if (!(x->value == y->value || (isnan(x->value) && isnan(y->value))))
      abort();
    for (size_t j = 0; j < x->n_labels; j++)
      if (strcmp(x->labels[j].name, y->labels[j].name) ||
          strcmp(x->labels[j].value, y->labels[j].value))
        abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct prom_doc d;
  char err[256];
  int rc = promtext_parse((const char *)data, size, &d, err, sizeof err);
  if (rc) {
    if ((rc != GS_EPARSE && rc != GS_ETOOBIG && rc != GS_ENOMEM) || strncmp(err, "line ", 5) ||
        d.n || d.samples || d.priv)
      abort();
    return 0;
  }
  if (d.n > PROMTEXT_MAX_SAMPLES)
    abort();
  for (size_t i = 0; i < d.n; i++) {
    const struct prom_sample *s = &d.samples[i];
    if (!s->name[0] || strlen(s->name) > PROMTEXT_MAX_NAME || s->n_labels > PROMTEXT_MAX_LABELS)
      abort();
    for (size_t j = 0; j < s->n_labels; j++)
      if (prom_label(s, s->labels[j].name) != s->labels[j].value)
        abort(); /* names are unique, so the lookup finds this one */
  }
  struct buf b;
  buf_init(&b, (size_t)PROMTEXT_MAX_BYTES * 4);
  if (write_doc(&d, &b) == 0) {
    struct prom_doc again;
    size_t len = b.len;
    if (len <= PROMTEXT_MAX_BYTES) {
      if (promtext_parse(b.data ? b.data : "", len, &again, err, sizeof err) != 0)
        abort();
      same_doc(&d, &again);
      promtext_free(&again);
    }
  }
  buf_free(&b);

  /* The engine reader over two scrapes of the same document: every signal it sets is finite and
   * a Triton rate never negative. */
  struct engine_prev prev = {0};
  for (int k = 0; k < 2; k++) {
    struct engine_reading r;
    memset(&r, 0, sizeof r);
    engine_read(ENGINE_UNKNOWN, &d, 1000 + k * 5000, &prev, &r);
    for (int sgl = 0; sgl < ES__COUNT; sgl++)
      if (engine_has(&r, (enum engine_signal)sgl) &&
          (!isfinite(r.v[sgl]) || r.v[sgl] < 0 || r.kind == ENGINE_UNKNOWN))
        abort();
    if (strnlen(r.reason, sizeof r.reason) >= sizeof r.reason)
      abort();
    /* A latency signal carries a well-formed histogram holding as many observations as it says
     * (the same page twice: an idle window, or none). */
    for (int sgl = 0; sgl < ES__COUNT; sgl++) {
      int f = engine_signal_latency((enum engine_signal)sgl);
      if (f < 0 || !engine_has(&r, (enum engine_signal)sgl))
        continue;
      if (latency_check(&r.lat[f], NULL, 0) || latency_count(&r.lat[f]) != r.v[sgl])
        abort();
    }
  }
  promtext_free(&d);
  return 0;
}
