#!/usr/bin/env bash
# Source checks (curl's checksrc in spirit): banned calls, very long functions, and formatting.
set -u
cd "$(dirname "$0")/.."
status=0
files=$(git ls-files 'src/*.c' 'src/*.h' 'tests/*.c' 'tests/*.h' 'bench/*.c' 2>/dev/null)
[ -n "$files" ] || files=$(find src tests bench -name '*.[ch]' 2>/dev/null)

# Banned calls: unbounded or unchecked string/number handling.
banned='\b(sprintf|vsprintf|strcpy|strcat|atoi|atol|atoll|gets)[[:space:]]*\('
if hits=$(grep -nE "$banned" $files | grep -vE '^\S+:[0-9]+:\s*(/\*|\*|//)'); then
  if [ -n "$hits" ]; then
    echo "checksrc: banned calls (use snprintf, memcpy with lengths, strtol/strtod):"
    echo "$hits"
    status=1
  fi
fi

# Very long functions: a body over 200 lines is two functions.
for f in $files; do
  case "$f" in *.c) ;; *) continue ;; esac
  awk -v file="$f" '
    /^[a-zA-Z].*\(.*\)[[:space:]]*\{[[:space:]]*$/ { start = NR; name = $0 }
    /^\}/ { if (start && NR - start > 200) { printf "checksrc: %s:%d: function is %d lines (max 200): %s\n", file, start, NR - start, name; bad = 1 } start = 0 }
    END { exit bad }' "$f" || status=1
done

# Formatting: the committed .clang-format is the style.
if command -v clang-format >/dev/null 2>&1; then
  for f in $files; do
    if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
      echo "checksrc: $f is not clang-formatted (run: make format)"
      status=1
    fi
  done
fi
[ $status -eq 0 ] && echo "checksrc: ok"
exit $status
