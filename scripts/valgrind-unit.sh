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
  log=$(mktemp -t gs-valgrind.XXXXXX)
  # test_alloc_fail defines malloc and friends itself (tests/unit/alloc_fail.h) and forwards to
  # libc's: valgrind must then replace only libc's, not the executable's.
  extra=()
  [ "$(basename "$t")" = test_alloc_fail ] && extra=(--soname-synonyms=somalloc=nouserintercepts)
  # Only definite leaks are reported (and fail): gRPC's and glibc's "possibly lost" thread and TLS blocks
  # would bury the one error that matters.
  if valgrind -q "${extra[@]}" --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite \
      --error-exitcode=99 --suppressions="$(dirname "$0")/valgrind.supp" "$t" >"$log" 2>&1; then
    echo "valgrind: $(basename "$t") ok"
  else
    rc=$?
    if [ $rc -eq 99 ]; then why="memcheck errors"; else why="the test failed (exit $rc)"; fi
    echo "valgrind: $(basename "$t") FAILED: $why"
    # The test's own failures (cmocka) and memcheck's first errors, then the end of the log.
    grep -E '^\[  (FAILED|ERROR) |^\[  FAILED  \]|[Ff]ailure|assert|^==[0-9]+== (Invalid|Conditional|Use of|Syscall|Mismatched|[0-9,]+ bytes in [0-9,]+ blocks are definitely)' \
      "$log" | head -20 | sed 's/^/  > /'
    tail -40 "$log"
    fail=1
  fi
  rm -f "$log"
done
echo "valgrind: $n unit-test binaries checked"
exit $fail
