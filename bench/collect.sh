#!/usr/bin/env bash
# Gathers the rows of the bench scripts' outputs ("| figure | value | baseline |" lines, as
# bench/run.sh, streams.sh (agent and gateway) and soak.sh print them) into one table on stdout
# and a JSON copy.
#
#   bash bench/collect.sh OUT.json FILE...      (`make bench` runs it; docs/bench.md)
#
# Each FILE is one script's stdout; its name (without .txt) is the row's "part" in the JSON.
# A file that is missing or holds no row is named on stderr and makes the exit status 1, so that
# a bench that did not run cannot pass for one that did.
set -euo pipefail
JSON=$1
shift
rc=0
esc() { sed 's/\\/\\\\/g; s/"/\\"/g'; }
{
  printf '{\n  "date": "%s",\n  "commit": "%s",\n  "cpus": %d,\n  "loadavg": "%s",\n  "rows": [' \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
    "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)"
  sep=""
  for f in "$@"; do
    part=$(basename "$f" .txt)
    [[ -r $f ]] || continue
    while IFS='|' read -r _ fig val base _; do
      fig=$(sed 's/^ *//; s/ *$//' <<<"$fig" | esc)
      val=$(sed 's/^ *//; s/ *$//' <<<"$val" | esc)
      base=$(sed 's/^ *//; s/ *$//' <<<"$base" | esc)
      printf '%s\n    {"part": "%s", "figure": "%s", "value": "%s", "baseline": "%s"}' \
        "$sep" "$part" "$fig" "$val" "$base"
      sep=,
    done < <(grep '^| ' "$f" | grep -v '^| figure ')
  done
  printf '\n  ]\n}\n'
} >"$JSON"

printf '\ngpuscale bench, %s, %d CPUs (load average %s), commit %s\n\n' "$(date -u +%Y-%m-%dT%H:%MZ)" \
  "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" \
  "$(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo unknown)"
printf '| %-44s | %-38s | %-56s |\n' "figure" "gpuscale" "baseline / ceiling (same run)"
printf '|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..46})" "$(printf -- '-%.0s' {1..40})" \
  "$(printf -- '-%.0s' {1..58})"
for f in "$@"; do
  if [[ ! -r $f ]] || ! grep -v '^| figure ' "$f" | grep -q '^| '; then
    echo "bench/collect.sh: no rows from $f" >&2
    rc=1
    continue
  fi
  grep '^| ' "$f" | grep -v '^| figure '
done
printf '\nJSON copy: %s\n' "$JSON"
exit $rc
