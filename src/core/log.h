/* Level-checked logging as logfmt or JSON lines on stderr, with a module prefix and rate limiting.
 */
#ifndef GS_LOG_H
#define GS_LOG_H

#include <stdbool.h>
#include <stdint.h>

enum log_level { LOG_LVL_DEBUG = 0, LOG_LVL_INFO, LOG_LVL_WARN, LOG_LVL_ERROR };
enum log_format { LOG_FMT_LOGFMT = 0, LOG_FMT_JSON };

/* Sets the threshold and output format. Thread-safe to call before threads start. */
void log_setup(enum log_level level, enum log_format fmt);
/* Parses "debug|info|warn|error" / "logfmt|json". Return 0 or GS_EINVAL. */
int log_level_parse(const char *s, enum log_level *out);
int log_format_parse(const char *s, enum log_format *out);
enum log_level log_get_level(void);

/* Writes one line: ts, level, module, msg (printf-formatted). Prefer the macros. */
void log_write(enum log_level lvl, const char *module, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define LOG_AT(lvl, mod, ...)                                                                      \
  do {                                                                                             \
    if ((lvl) >= log_get_level())                                                                  \
      log_write((lvl), (mod), __VA_ARGS__);                                                        \
  } while (0)
#define LOG_DEBUG(mod, ...) LOG_AT(LOG_LVL_DEBUG, mod, __VA_ARGS__)
#define LOG_INFO(mod, ...) LOG_AT(LOG_LVL_INFO, mod, __VA_ARGS__)
#define LOG_WARN(mod, ...) LOG_AT(LOG_LVL_WARN, mod, __VA_ARGS__)
#define LOG_ERROR(mod, ...) LOG_AT(LOG_LVL_ERROR, mod, __VA_ARGS__)

/* Rate limiter for errors that repeat every interval (collectd's complain):
 * log_complain returns true when the caller should log now; the gap doubles up to 1 h. */
struct log_complain {
  int64_t next_ms;
  int64_t gap_ms;
  uint64_t suppressed;
};
bool log_complain(struct log_complain *c, int64_t now_ms);
/* Resets the limiter once the condition has cleared; returns true if it had been complaining. */
bool log_complain_clear(struct log_complain *c);

#endif
