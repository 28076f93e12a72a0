/* Unit tests for the DRA ResourceSlice table: the v1 and v1beta1 shapes, other drivers and
 * devices without a uuid left out, malformed answers refused, and the (pool, device) lookup. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/draslices.h"
#include "core/err.h"

/* resource.k8s.io/v1 (and v1beta2): attributes on the device; two slices of one pool, another
 * driver's slice, a device without a uuid, a qualified attribute name. */
static const char v1[] =
    "{\"kind\":\"ResourceSliceList\",\"apiVersion\":\"resource.k8s.io/v1\",\"items\":["
    "{\"spec\":{\"driver\":\"gpu.nvidia.com\",\"nodeName\":\"n1\",\"pool\":{\"name\":\"n1\","
    "\"generation\":1,\"resourceSliceCount\":2},\"devices\":["
    "{\"name\":\"gpu-0\",\"attributes\":{\"type\":{\"string\":\"gpu\"},"
    "\"uuid\":{\"string\":\"GPU-aaaa\"}}},"
    "{\"name\":\"gpu-0-mig-1g10gb-19-0\",\"attributes\":{\"type\":{\"string\":\"mig\"},"
    "\"uuid\":{\"string\":\"MIG-1111\"},\"parentUUID\":{\"string\":\"GPU-aaaa\"}}},"
    "{\"name\":\"gpu-0-mig-1g10gb-19-1\",\"attributes\":{\"gpu.nvidia.com/uuid\":"
    "{\"string\":\"MIG-2222\"}}},"
    "{\"name\":\"no-uuid\",\"attributes\":{\"type\":{\"string\":\"gpu\"}}},"
    "{\"name\":\"int-uuid\",\"attributes\":{\"uuid\":{\"int\":3}}}]}},"
    "{\"spec\":{\"driver\":\"dra.net.example.com\",\"pool\":{\"name\":\"n1\"},\"devices\":["
    "{\"name\":\"gpu-0\",\"attributes\":{\"uuid\":{\"string\":\"NIC-0\"}}}]}},"
    "{\"spec\":{\"driver\":\"gpu.nvidia.com\",\"pool\":{\"name\":\"n1\"},\"devices\":["
    "{\"name\":\"gpu-1\",\"attributes\":{\"uuid\":{\"string\":\"GPU-bbbb\"}}}]}}]}";

/* resource.k8s.io/v1beta1: attributes under basic. */
static const char v1beta1[] =
    "{\"items\":[{\"spec\":{\"driver\":\"gpu.nvidia.com\",\"pool\":{\"name\":\"p\"},"
    "\"devices\":[{\"name\":\"gpu-3\",\"basic\":{\"attributes\":{\"uuid\":"
    "{\"string\":\"GPU-cccc\"}}}}]}}]}";

static void test_parse_v1(void **state) {
  (void)state;
  struct draslices s;
  const char *err = NULL;
  assert_int_equal(draslices_parse(v1, strlen(v1), "gpu.nvidia.com", &s, &err), 0);
  assert_int_equal(s.n, 4);
  assert_string_equal(draslices_uuid(&s, "n1", "gpu-0"), "GPU-aaaa");
  assert_string_equal(draslices_uuid(&s, "n1", "gpu-0-mig-1g10gb-19-0"), "MIG-1111");
  assert_string_equal(draslices_uuid(&s, "n1", "gpu-0-mig-1g10gb-19-1"), "MIG-2222");
  assert_string_equal(draslices_uuid(&s, "n1", "gpu-1"), "GPU-bbbb");
  assert_null(draslices_uuid(&s, "n1", "no-uuid"));
  assert_null(draslices_uuid(&s, "n1", "int-uuid"));
  assert_null(draslices_uuid(&s, "other-pool", "gpu-0"));
  assert_null(draslices_uuid(NULL, "n1", "gpu-0"));
  draslices_free(&s);
  assert_int_equal(s.n, 0);
  draslices_free(&s);
  draslices_free(NULL);
}

static void test_parse_v1beta1(void **state) {
  (void)state;
  struct draslices s;
  assert_int_equal(draslices_parse(v1beta1, strlen(v1beta1), "gpu.nvidia.com", &s, NULL), 0);
  assert_int_equal(s.n, 1);
  assert_string_equal(draslices_uuid(&s, "p", "gpu-3"), "GPU-cccc");
  draslices_free(&s);
  /* another driver's view of the same answer is empty, not an error */
  assert_int_equal(draslices_parse(v1beta1, strlen(v1beta1), "other", &s, NULL), 0);
  assert_int_equal(s.n, 0);
  draslices_free(&s);
}

static void test_parse_bad(void **state) {
  (void)state;
  static const char *const bad[] = {
      "", "{", "[]", "{\"items\":{}}", "{\"kind\":\"Status\"}", "{\"items\":[]} trailing", "null"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    struct draslices s;
    const char *err = NULL;
    int rc = draslices_parse(bad[i], strlen(bad[i]), "gpu.nvidia.com", &s, &err);
    if (rc != GS_EPARSE)
      fail_msg("\"%s\": rc %d, want GS_EPARSE", bad[i], rc);
    assert_non_null(err);
    assert_int_equal(s.n, 0);
  }
  /* items that are not slices are skipped */
  const char odd[] =
      "{\"items\":[1,\"x\",{\"spec\":7},{\"spec\":{\"driver\":\"gpu.nvidia.com\"}}]}";
  struct draslices s;
  assert_int_equal(draslices_parse(odd, strlen(odd), "gpu.nvidia.com", &s, NULL), 0);
  assert_int_equal(s.n, 0);
}

/* DRASLICES_MAX_BYTES (8 MiB): a list of exactly 8 MiB (leading whitespace, then the v1 list) is
 * read; one byte more is refused with nothing handed back. */
static void test_size_cap(void **state) {
  (void)state;
  char *b = malloc(DRASLICES_MAX_BYTES + 1);
  assert_non_null(b);
  for (size_t extra = 0; extra <= 1; extra++) {
    size_t len = DRASLICES_MAX_BYTES + extra, pad = len - strlen(v1);
    memset(b, ' ', pad);
    memcpy(b + pad, v1, strlen(v1));
    struct draslices s;
    const char *err = NULL;
    int rc = draslices_parse(b, len, "gpu.nvidia.com", &s, &err);
    if (extra == 0) {
      assert_int_equal(rc, 0);
      assert_int_equal(s.n, 4);
      assert_string_equal(draslices_uuid(&s, "n1", "gpu-1"), "GPU-bbbb");
    } else {
      assert_int_equal(rc, GS_ETOOBIG);
      assert_int_equal(s.n, 0);
      assert_string_equal(err, "ResourceSliceList over the size limit");
    }
    draslices_free(&s);
  }
  free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_v1),
      cmocka_unit_test(test_parse_v1beta1),
      cmocka_unit_test(test_parse_bad),
      cmocka_unit_test(test_size_cap),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
