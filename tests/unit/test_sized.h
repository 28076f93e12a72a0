/* Test helper: files of an exact size, for the tests of input caps. Include after cmocka.h. */
#ifndef GS_TEST_SIZED_H
#define GS_TEST_SIZED_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Writes head, then a "#xxx...\n" comment (valid YAML: a scalar followed by a comment is still
 * read whole) up to exactly size bytes, and closes f. */
static void write_sized_fp(FILE *f, const char *head, size_t size) {
  assert_non_null(f);
  size_t hl = strlen(head);
  assert_true(size >= hl + 2);
  char *pad = malloc(size - hl);
  assert_non_null(pad);
  memset(pad, 'x', size - hl);
  pad[0] = '#';
  pad[size - hl - 1] = '\n';
  assert_int_equal(fwrite(head, 1, hl, f), hl);
  assert_int_equal(fwrite(pad, 1, size - hl, f), size - hl);
  free(pad);
  assert_int_equal(fclose(f), 0);
}

#endif
