/* Logfmt / JSON-lines logger on stderr with level checks and a repeat limiter. */
#include "core/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/err.h"

static enum log_level g_level = LOG_LVL_INFO;
static enum log_format g_format = LOG_FMT_LOGFMT;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void log_setup(enum log_level level, enum log_format fmt) {
  g_level = level;
  g_format = fmt;
}

enum log_level log_get_level(void) {
  return g_level;
}

int log_level_parse(const char *s, enum log_level *out) {
  for (int i = 0; i < 4; i++)
    if (strcmp(s, level_names[i]) == 0) {
      *out = (enum log_level)i;
      return 0;
    }
  if (strcmp(s, "warning") == 0) {
    *out = LOG_LVL_WARN;
    return 0;
  }
  return GS_EINVAL;
}

int log_format_parse(const char *s, enum log_format *out) {
  if (strcmp(s, "logfmt") == 0)
    *out = LOG_FMT_LOGFMT;
  else if (strcmp(s, "json") == 0)
    *out = LOG_FMT_JSON;
  else
    return GS_EINVAL;
  return 0;
}

/* Writes s escaped for a double-quoted logfmt or JSON string. */
static void put_escaped(FILE *f, const char *s) {
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c == '\n')
      fputs("\\n", f);
    else if (c == '\t')
      fputs("\\t", f);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
}

void log_write(enum log_level lvl, const char *module, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);

  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char tbuf[40];
  size_t tl = strftime(tbuf, sizeof tbuf, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(tbuf + tl, sizeof tbuf - tl, ".%03ldZ", ts.tv_nsec / 1000000);

  pthread_mutex_lock(&g_lock);
  if (g_format == LOG_FMT_JSON) {
    fprintf(stderr, "{\"ts\":\"%s\",\"level\":\"%s\",\"module\":\"%s\",\"msg\":\"", tbuf,
            level_names[lvl], module);
    put_escaped(stderr, msg);
    fputs("\"}\n", stderr);
  } else {
    fprintf(stderr, "ts=%s level=%s module=%s msg=\"", tbuf, level_names[lvl], module);
    put_escaped(stderr, msg);
    fputs("\"\n", stderr);
  }
  fflush(stderr);
  pthread_mutex_unlock(&g_lock);
}

bool log_complain(struct log_complain *c, int64_t now_ms) {
  if (c->gap_ms == 0) {
    c->gap_ms = 1000;
    c->next_ms = now_ms + c->gap_ms;
    return true;
  }
  if (now_ms < c->next_ms) {
    c->suppressed++;
    return false;
  }
  c->gap_ms *= 2;
  if (c->gap_ms > 3600 * 1000)
    c->gap_ms = 3600 * 1000;
  c->next_ms = now_ms + c->gap_ms;
  return true;
}

bool log_complain_clear(struct log_complain *c) {
  bool was = c->gap_ms != 0;
  c->gap_ms = 0;
  c->next_ms = 0;
  c->suppressed = 0;
  return was;
}
