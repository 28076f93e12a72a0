#!/usr/bin/env bash
# Runs every unit-test binary under valgrind memcheck; fails on any error or definite leak.
set -u
BUILD=${1:-build}
# As ctest does (tests/CMakeLists.txt): the tests' loopback servers bypass any proxy of this machine.
export no_proxy=127.0.0.1,localhost,::1 NO_PROXY=127.0.0.1,localhost,::1
fail=0
n=0
for t in "$BUILD"/tests/test_*; do
  [ -x "$t" ] || continue
  n=$((n + 1))
  log=$(mktemp)
  if valgrind -q --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=99 \
      --suppressions="$(dirname "$0")/valgrind.supp" "$t" >"$log" 2>&1; then
    echo "valgrind: $(basename "$t") ok"
  else
    echo "valgrind: $(basename "$t") FAILED"
    tail -40 "$log"
    fail=1
  fi
  rm -f "$log"
done
echo "valgrind: $n unit-test binaries checked"
exit $fail
