/* Unit tests for duration parsing and formatting, and the two clocks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/err.h"
#include "core/timeutil.h"

struct dur_case {
  const char *in;
  int rc;
  int64_t ms;
};

static const struct dur_case dur_cases[] = {
    {"500ms", 0, 500},
    {"1ms", 0, 1},
    {"1s", 0, 1000},
    {"90s", 0, 90000},
    {"10m", 0, 600000},
    {"1m30s", 0, 90000},
    {"2h", 0, 7200000},
    {"1h1m1s1ms", 0, 3661001},
    {"1.5s", 0, 1500},
    {"0.25m", 0, 15000},
    {"1d", 0, 86400000},
    {"0s1ms", 0, 1}, /* a zero part is fine when the total is not zero */
    {"", GS_EINVAL, 0},
    {"0s", GS_EINVAL, 0},
    {"0ms", GS_EINVAL, 0},
    {"0", GS_EINVAL, 0},
    {"5", GS_EINVAL, 0}, /* no unit */
    {"1.5", GS_EINVAL, 0},
    {"1s5", GS_EINVAL, 0}, /* trailing number without unit */
    {"-1s", GS_EINVAL, 0},
    {"+1s", GS_EINVAL, 0},
    {"1x", GS_EINVAL, 0},
    {"0x1As", GS_EINVAL, 0}, /* hex is not a duration */
    {"1e3s", GS_EINVAL, 0},  /* nor an exponent */
    {"1.s", GS_EINVAL, 0},
    {"1 s", GS_EINVAL, 0},
    {" 1s", GS_EINVAL, 0},
    {"1s ", GS_EINVAL, 0},
    {"s", GS_EINVAL, 0},
    {"ms", GS_EINVAL, 0},
    {".s", GS_EINVAL, 0},
    {"1S", GS_EINVAL, 0},
    {"1us", GS_EINVAL, 0},
    {"abc", GS_EINVAL, 0},
    {"1e999s", GS_EINVAL, 0},
    {"99999999999999999999h", GS_EINVAL, 0}, /* overflow */
    {"0.0001ms", GS_EINVAL, 0},              /* rounds to 0 */
};

static void test_duration_parse(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof dur_cases / sizeof dur_cases[0]; i++) {
    const struct dur_case *c = &dur_cases[i];
    int64_t ms = -777;
    int rc = duration_parse_ms(c->in, &ms);
    if (rc != c->rc || (rc == 0 && ms != c->ms))
      print_error("\"%s\": rc %d ms %lld; want rc %d ms %lld\n", c->in, rc, (long long)ms, c->rc,
                  (long long)c->ms);
    assert_int_equal(rc, c->rc);
    if (c->rc == 0)
      assert_int_equal(ms, c->ms);
    else
      assert_int_equal(ms, -777); /* untouched on error */
  }
  int64_t ms;
  assert_int_equal(duration_parse_ms(NULL, &ms), GS_EINVAL);
}

struct fmt_case {
  int64_t ms;
  const char *out;
};

static const struct fmt_case fmt_cases[] = {
    {250, "250ms"},   {1000, "1s"},      {1500, "1500ms"}, {60000, "1m"},
    {90000, "1m30s"}, {600000, "10m"},   {3600000, "1h"},  {3601000, "1h1s"},
    {7200000, "2h"},  {86400000, "24h"}, {0, "0ms"},
};

static void test_duration_format(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof fmt_cases / sizeof fmt_cases[0]; i++) {
    char buf[32];
    duration_format(fmt_cases[i].ms, buf, sizeof buf);
    assert_string_equal(buf, fmt_cases[i].out);
    /* Round trip: what we print, we parse back (except 0, which is never a duration). */
    int64_t back = -1;
    if (fmt_cases[i].ms > 0) {
      assert_int_equal(duration_parse_ms(buf, &back), 0);
      assert_int_equal(back, fmt_cases[i].ms);
    }
  }
  char tiny[4];
  duration_format(3661000, tiny, sizeof tiny); /* "1h1m1s" truncated, never overflowed */
  assert_true(strlen(tiny) < sizeof tiny);
}

static void test_clocks(void **state) {
  (void)state;
  int64_t a = time_mono_ms(), b = time_mono_ms();
  assert_true(b >= a);
  assert_true(a >= 0);
  /* After 2020-01-01 in milliseconds, not seconds. */
  assert_true(time_wall_ms() > 1577836800000LL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_duration_parse),
      cmocka_unit_test(test_duration_format),
      cmocka_unit_test(test_clocks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
