#!/usr/bin/env bash
# The README's quick start, as written, from a fresh clone: `make check` three times in a row, each of which
# must pass and leave nothing of the project's own in /tmp. Two places to run it:
#
#   sudo bash scripts/fresh-debian-check.sh [--worktree] [--runs N] [--mirror URL] [--ca-bundle FILE] [--dir DIR] [--keep]
#        bash scripts/fresh-debian-check.sh --clone [--worktree] [--runs N] [--dir DIR] [--keep]
#
#   (default)         in a pristine Debian 12 root (debootstrap --variant=minbase bookworm), as root: every line
#                     of the README's quick start, `make check` N times
#   --clone           on this machine, as CI runs: `make check` N times in a fresh clone, nothing else
#   --worktree        the working tree (tracked and untracked, not ignored files) over the clone, not only HEAD
#   --runs N          how many `make check` runs (default 3): a flaky test shows in the second or the third
#   --mirror URL      the Debian mirror for debootstrap and the root's apt (default: the host's configured
#                     Debian mirror from /etc/apt/sources.list.d/ or /etc/apt/sources.list; required when neither names one)
#   --ca-bundle FILE  a PEM CA bundle for networks that intercept TLS: trusted in the root by npm/Node.js
#                     (NODE_EXTRA_CA_CERTS), by apt for an https mirror, and by ca-certificates once installed
#   --dir DIR         the scratch directory (default: a new /var/tmp/gpuscale-fresh.XXXXXX, outside /tmp)
#   --keep            keep the root or the clone afterwards (default: removed when every step passed)
#
# The project: `git clone` of this checkout at HEAD (resolved once), with a copy of the `shared/` directory
# beside this checkout (../shared, when there is one) beside the clone, as CI has it. In the root, it is
# /root/gpuscale; every line of the README's first quick-start block runs there verbatim, as root: `make run` in
# the background until /readyz answers, then the lines of the README's "While `make run` is running" block
# (a `gpuscale query`), then `make run` is stopped and the next lines run, `make check` N times. The lines are
# read from README.md, so this check follows the README.
#
# /tmp: listed before and after each `make check` (the top level, and one level into pytest-of-*); what is new
# after a run fails that run's /tmp row, with the names. In the root, /tmp is the root's own and only the
# checks run there: every new name counts. With --clone, other programs share this machine's /tmp: only names
# the project uses count (gs-*, gs_*, gsk-*, gsp-*, gpuscale*, fakeprom-*: every temp name in tests/, bench/
# and scripts/ starts so), and the other new names are listed as not counted.
#
# FRESH_CHECK_CMD, when set, runs instead of `make check` (a bash command line, in the project directory):
# for testing this script in seconds, e.g. FRESH_CHECK_CMD=true, =false, or ='mktemp -d /tmp/gs-leak.XXXXXX'
# (which must fail the /tmp row). A real run takes about 25 minutes per `make check` on a quiet 2-core machine.
#
# Prints a table of steps and times and a summary line; exits non-zero when any step failed. In the root,
# /proc, /sys, /dev/pts and /dev/shm are unmounted on every exit; it needs root, about 3 GB of disk, and
# downloads about 1 GB. Not part of `make check` (a run inside a run refuses to start): run it before a
# release, after touching the install scripts, and after a change to how tests use ports or temp files.
set -uo pipefail

ROOT_SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODE=root
WORKTREE=0
RUNS=3
MIRROR=""
CA=""
DIR=""
KEEP=0
usage() { sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --clone) MODE=clone ;;
    --worktree) WORKTREE=1 ;;
    --runs) RUNS="${2:?--runs needs a number}"; shift ;;
    --runs=*) RUNS="${1#*=}" ;;
    --mirror) MIRROR="${2:?--mirror needs a URL}"; shift ;;
    --mirror=*) MIRROR="${1#*=}" ;;
    --ca-bundle) CA="${2:?--ca-bundle needs a file}"; shift ;;
    --ca-bundle=*) CA="${1#*=}" ;;
    --dir) DIR="${2:?--dir needs a directory}"; shift ;;
    --dir=*) DIR="${1#*=}" ;;
    --keep) KEEP=1 ;;
    -h | --help) usage 0 ;;
    *) echo "fresh-debian-check: unknown argument \"$1\"" >&2; usage ;;
  esac
  shift
done
if [ -n "${FRESH_DEBIAN_CHECK_INSIDE:-}" ]; then
  echo "fresh-debian-check: already inside a fresh check (FRESH_DEBIAN_CHECK_INSIDE is set); not starting another" >&2
  exit 2
fi
case "$RUNS" in '' | *[!0-9]* | 0) echo "fresh-debian-check: --runs $RUNS: give a number from 1" >&2; exit 2 ;; esac
if [ "$MODE" = root ]; then
  [ "$(id -u)" = 0 ] || { echo "fresh-debian-check: needs root (debootstrap, chroot, mount); --clone does not" >&2; exit 2; }
  if [ -n "$CA" ] && [ ! -r "$CA" ]; then echo "fresh-debian-check: --ca-bundle $CA: cannot read it" >&2; exit 2; fi
elif [ -n "$MIRROR" ] || [ -n "$CA" ]; then
  echo "fresh-debian-check: --mirror and --ca-bundle are for the Debian root, not --clone" >&2
  exit 2
fi

# The host's Debian mirror: the first URIs/deb line for a plain bookworm suite (not -security/-updates).
host_mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk 'BEGIN { RS = ""; FS = "\n" }
      { uri = ""; ok = 0
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^URIs:/) { split($i, a, /[ \t]+/); uri = a[2] }
          if ($i ~ /^Suites:/ && $i ~ /[ \t]bookworm([ \t]|$)/) ok = 1
        }
        if (ok && uri != "") { print uri; exit } }' "$f"
  done
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
    awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i !~ /\]$/) { if ($(i + 1) == "bookworm") print $i; break } }'
}
[ "$MODE" = clone ] || [ -n "$MIRROR" ] || MIRROR="$(host_mirror | head -n1)"
if [ "$MODE" = root ] && [ -z "$MIRROR" ]; then
  echo "fresh-debian-check: no bookworm mirror in this machine's apt sources; pass --mirror URL" >&2
  exit 2
fi

# The README's lines: the first ```sh block of "## Quick start", and the block after "While `make run` is running".
readme_block() { # $1: awk regex of the line the block follows (the first ```sh after it)
  awk -v after="$1" '
    !found && $0 ~ after { found = 1; next }
    found && !inb && /^```sh/ { inb = 1; next }
    inb && /^```/ { exit }
    inb && NF { print }' "$ROOT_SRC/README.md"
}
mapfile -t QUICK < <(readme_block '^## Quick start')
mapfile -t WHILE_RUN < <(readme_block '^While `make run` is running')
if [ "$MODE" = root ] && { [ ${#QUICK[@]} -eq 0 ] || ! printf '%s\n' "${QUICK[@]}" | grep -q '^make run' ||
  ! printf '%s\n' "${QUICK[@]}" | grep -q '^make check'; }; then
  echo "fresh-debian-check: no quick-start block with a \`make run\` and a \`make check\` line found in README.md" >&2
  exit 2
fi

if [ -z "$DIR" ]; then DIR="$(mktemp -d /var/tmp/gpuscale-fresh.XXXXXX)"; else mkdir -p "$DIR"; fi
DIR="$(cd "$DIR" && pwd -P)"
R="$DIR/root"
LOGS="$DIR/logs"
mkdir -p "$LOGS"
PROJ=/root/gpuscale # in the root
if [ "$MODE" = root ]; then CLONE="$R$PROJ"; else CLONE="$DIR/gpuscale"; fi
RUN_PGID=""
# The commit is resolved once: HEAD may move while the check runs (debootstrap takes a minute).
COMMIT="$(git -C "$ROOT_SRC" rev-parse HEAD)" || { echo "fresh-debian-check: $ROOT_SRC is not a git checkout" >&2; exit 2; }
if [ "$WORKTREE" = 1 ]; then
  SRC_DESC="working tree on ${COMMIT:0:7}$(git -C "$ROOT_SRC" diff --quiet HEAD -- 2>/dev/null || echo ' + uncommitted changes')"
else
  SRC_DESC="commit ${COMMIT:0:7}"
fi

# ---- the table
steps=()
results=()
times=()
notes=()
record() { steps+=("$1"); results+=("$2"); times+=("$3"); notes+=("${4:-}"); }
table() {
  echo
  if [ "$MODE" = root ]; then echo "fresh-debian-check: Debian 12 minbase, mirror $MIRROR, project $SRC_DESC"
  else echo "fresh-debian-check: a fresh clone on this machine ($(hostname)), project $SRC_DESC"; fi
  printf '| %-2s | %-58s | %-7s | %7s | %s\n' "#" "step" "result" "seconds" "note"
  printf '|----|%s|---------|---------|------\n' "------------------------------------------------------------"
  local total=0
  for i in "${!steps[@]}"; do
    local st="${steps[$i]}"
    [ ${#st} -le 58 ] || st="${st:0:55}..."
    printf '| %-2s | %-58s | %-7s | %7s | %s\n' "$((i + 1))" "$st" "${results[$i]}" "${times[$i]}" "${notes[$i]}"
    total=$((total + times[i]))
  done
  printf '|    | %-58s | %-7s | %7s |\n' "total" "" "$total"
  echo "logs: $LOGS"
}

# The runs and what they left in /tmp, for the summary line.
if [ "$MODE" = root ]; then TMP_DIR="$R/tmp"; TMP_COUNT=all; else TMP_DIR=/tmp; TMP_COUNT=ours; fi
CHECKS_OK=0
CHECKS_RUN=0
TMP_LEFT=0 # names the runs left, all runs together
summary() {
  local what="make check"
  [ -n "${FRESH_CHECK_CMD:-}" ] && what="FRESH_CHECK_CMD"
  if [ "$CHECKS_RUN" -gt 0 ]; then
    echo "fresh-debian-check: $what passed $CHECKS_OK of $CHECKS_RUN runs; $TMP_LEFT new names left in $TMP_DIR (counting: $TMP_COUNT); $([ "$FAILED" = 0 ] && echo PASSED || echo FAILED)"
  else
    echo "fresh-debian-check: FAILED before the first $what run"
  fi
}

# ---- mounts, undone on every exit
mounts=()
mount_all() {
  mount -t proc proc "$R/proc" && mounts+=("$R/proc") || return 1
  mount --bind /sys "$R/sys" && mount -o remount,bind,ro "$R/sys" 2>/dev/null; mounts+=("$R/sys")
  mkdir -p "$R/dev/pts" "$R/dev/shm"
  mount --bind /dev/pts "$R/dev/pts" && mounts+=("$R/dev/pts") || return 1
  mount -t tmpfs -o mode=1777,nosuid,nodev shm "$R/dev/shm" && mounts+=("$R/dev/shm") || return 1
}
unmount_all() {
  local i m
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    m="${mounts[$i]}"
    mountpoint -q "$m" || continue
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || echo "fresh-debian-check: could not unmount $m" >&2
  done
  mounts=()
}
stop_run() {
  [ -n "$RUN_PGID" ] || return 0
  kill -TERM -- "-$RUN_PGID" 2>/dev/null
  for _ in $(seq 100); do kill -0 -- "-$RUN_PGID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL -- "-$RUN_PGID" 2>/dev/null
  RUN_PGID=""
}
FAILED=0
exec 3>&1 # the table goes to the caller's stdout even when the exit comes inside a step (its output is a log)
CURRENT="" # the step running now, for the table when interrupted
STARTED=0
finish() {
  if [ -n "$CURRENT" ]; then
    record "$CURRENT" STOPPED $(($(date +%s) - STARTED)) "interrupted or exited inside the step"
    FAILED=1
  fi
  stop_run
  if [ "$MODE" = root ]; then
    # Processes the checks left behind in the root (none expected) would hold the mounts.
    local p
    for p in /proc/[0-9]*; do
      [ "$(readlink "$p/root" 2>/dev/null)" = "$R" ] && kill -KILL "${p#/proc/}" 2>/dev/null
    done
    sleep 0.5
    unmount_all
  fi
  [ ${#steps[@]} -gt 0 ] && table >&3
  summary >&3
  if [ "$MODE" = clone ]; then
    if [ "$KEEP" = 0 ] && [ "$FAILED" = 0 ]; then rm -rf "$CLONE" "$DIR/shared"
    elif [ -d "$CLONE" ]; then echo "fresh-debian-check: the clone is kept in $CLONE" >&3; fi
  elif [ "$KEEP" = 0 ] && [ "$FAILED" = 0 ] && [ -d "$R" ]; then
    if findmnt -rn -o TARGET | grep -q "^$R/"; then
      echo "fresh-debian-check: something is still mounted under $R; not removing it" >&2
    else
      rm -rf --one-file-system "$R"
    fi
  elif [ -d "$R" ]; then
    echo "fresh-debian-check: the root is kept in $R" >&3
  fi
}
trap finish EXIT
trap 'exit 130' INT TERM

# in_root LOG CMD: runs the bash command line CMD in the root, as root, from the project directory, with
# the environment of a root login on a fresh machine (no locale, no proxy unless the host has one).
in_root() {
  local log=$1
  shift
  local envs=(HOME=/root USER=root LOGNAME=root SHELL=/bin/bash TERM=dumb
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
  local v
  for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
    [ -n "${!v:-}" ] && envs+=("$v=${!v}")
  done
  [ -n "$CA" ] && envs+=(NODE_EXTRA_CA_CERTS=/usr/local/share/ca-certificates/fresh-check-extra.crt)
  envs+=(FRESH_DEBIAN_CHECK_INSIDE=1)
  chroot "$R" /usr/bin/env -i "${envs[@]}" /bin/bash -c "cd $PROJ && $*" >>"$log" 2>&1
}
root_line() { in_root "$STEP_LOG" "$1"; }
# in_clone LOG CMD: runs the bash command line CMD in the clone, on this machine, in this environment.
in_clone() {
  local log=$1
  shift
  (cd "$CLONE" && FRESH_DEBIAN_CHECK_INSIDE=1 /bin/bash -c "$*") >>"$log" 2>&1
}

# step NAME CMD...: runs CMD (a host command), records result and time; on failure prints the log tail.
n=0
step() {
  local name=$1 t0 rc log
  shift
  n=$((n + 1))
  log="$LOGS/$(printf '%02d' "$n")-$(tr -c 'a-zA-Z0-9' '-' <<<"$name" | cut -c1-40).log"
  echo "fresh-debian-check: [$n] $name (log: $log)"
  t0=$(date +%s)
  CURRENT=$name
  STARTED=$t0
  LAST_LOG=$log
  STEP_LOG=$log "$@" >>"$log" 2>&1
  rc=$?
  CURRENT=""
  if [ $rc -eq 0 ]; then record "$name" ok $(($(date +%s) - t0)) "${STEP_NOTE:-}"
  else
    record "$name" FAILED $(($(date +%s) - t0)) "${STEP_NOTE:-exit $rc}"
    FAILED=1
    echo "fresh-debian-check: [$n] $name FAILED (exit $rc); last lines of $log:"
    tail -n 40 "$log" | sed 's/^/    /'
  fi
  STEP_NOTE=""
  return $rc
}

# ---- 1. debootstrap (the root only)
if [ "$MODE" = root ]; then
  if ! command -v debootstrap >/dev/null 2>&1; then
    step "apt-get install debootstrap (on the host)" bash -c 'apt-get install -y debootstrap || { apt-get update && apt-get install -y debootstrap; }' || exit 1
  fi
  if [ -e "$R" ]; then echo "fresh-debian-check: $R exists; give a new --dir" >&2; FAILED=1; exit 2; fi
  do_debootstrap() {
    debootstrap --variant=minbase bookworm "$R" "$MIRROR" || return 1
    STEP_NOTE="$(chroot "$R" dpkg-query -W -f='.\n' | wc -l) packages, $(du -sm --one-file-system "$R" | cut -f1) MB"
  }
  step "debootstrap --variant=minbase bookworm" do_debootstrap || exit 1
  if [ -n "$CA" ]; then
    mkdir -p "$R/usr/local/share/ca-certificates"
    cp "$CA" "$R/usr/local/share/ca-certificates/fresh-check-extra.crt"
    case "$MIRROR" in https:*)
      echo "Acquire::https::CAInfo \"/usr/local/share/ca-certificates/fresh-check-extra.crt\";" >"$R/etc/apt/apt.conf.d/99fresh-check-ca" ;;
    esac
  fi
  mount_all || { echo "fresh-debian-check: mounting /proc, /sys, /dev/pts, /dev/shm in $R failed" >&2; FAILED=1; exit 1; }
elif [ -e "$CLONE" ]; then
  echo "fresh-debian-check: $CLONE exists; give a new --dir" >&2
  FAILED=1
  exit 2
fi

# ---- 2. the project: a fresh clone, and shared/ beside it as CI has it
SHARED_SRC="$(cd "$ROOT_SRC/.." && pwd)/shared"
clone_project() {
  mkdir -p "$(dirname "$CLONE")"
  git clone -q --no-hardlinks "$ROOT_SRC" "$CLONE" || return 1
  git -C "$CLONE" -c advice.detachedHead=false checkout -q "$COMMIT" || return 1
  if [ "$WORKTREE" = 1 ]; then
    (cd "$ROOT_SRC" && git ls-files -z -co --exclude-standard |
      while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
      tar --null -T - -cf -) | tar -xf - -C "$CLONE" || return 1
  fi
  STEP_NOTE="$(git -C "$CLONE" ls-files | wc -l) files"
  if [ -d "$SHARED_SRC" ]; then
    cp -a "$SHARED_SRC" "$(dirname "$CLONE")/shared" || return 1
    STEP_NOTE="$STEP_NOTE; shared/ beside it ($(find "$SHARED_SRC" -type f | wc -l) files)"
  else
    STEP_NOTE="$STEP_NOTE; no shared/ beside this checkout, so none beside the clone"
  fi
}
step "git clone ($SRC_DESC) to $CLONE" clone_project || exit 1

# ---- /tmp before and after each make check
OURS_RE='^(gs[-_]|gsk-|gsp-|gpuscale|fakeprom-)'
# tmp_list: the names in /tmp, and one level into pytest-of-* (pytest keeps its sessions there), sorted.
tmp_list() {
  find "$TMP_DIR" -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null
  local d
  for d in "$TMP_DIR"/pytest-of-*; do
    [ -d "$d" ] && find "$d" -mindepth 1 -maxdepth 1 -printf "${d##*/}/%f\n" 2>/dev/null
  done
}
tmp_row() { # $1: run number, $2: the listing before the run
  local new counted others name
  new="$(LC_ALL=C comm -13 <(LC_ALL=C sort <<<"$2") <(tmp_list | LC_ALL=C sort))"
  if [ "$TMP_COUNT" = all ]; then counted="$new"; others=""
  else
    counted="$(grep -E "$OURS_RE" <<<"$new")"
    others="$(grep -vE "$OURS_RE" <<<"$new" | grep -c .)"
    [ "$others" = 0 ] && others=""
  fi
  local cnt
  cnt=$(grep -c . <<<"$counted")
  local log
  log="$LOGS/$(printf '%02d' $((n + 1)))-tmp-after-run-$1.log"
  n=$((n + 1))
  { echo "new in $TMP_DIR after run $1 (counted: $TMP_COUNT):"; printf '%s\n' "$new"; } >"$log"
  if [ "$cnt" -eq 0 ]; then
    record "/tmp after run $1: nothing new of the project's" ok 0 "${others:+$others new names of other programs, not counted}"
  else
    record "/tmp after run $1: nothing new of the project's" FAILED 0 "$cnt new: $(head -n 5 <<<"$counted" | paste -sd' ' -)"
    FAILED=1
    TMP_LEFT=$((TMP_LEFT + cnt))
    echo "fresh-debian-check: run $1 left in $TMP_DIR:"
    sed 's/^/    /' <<<"$counted"
  fi
}

run_check() { # $1: the command line
  local before after rc
  [ "$MODE" = root ] && before=$(count_pkgs)
  if [ "$MODE" = root ]; then in_root "$STEP_LOG" "$1"; else in_clone "$STEP_LOG" "$1"; fi
  rc=$?
  STEP_NOTE="$(grep -E '^check: [0-9]+ passed' "$STEP_LOG" | tail -n1)"
  if [ "$MODE" = root ]; then
    after=$(count_pkgs)
    STEP_NOTE="${STEP_NOTE:+$STEP_NOTE; }installed $((after - before)) packages"
  fi
  return $rc
}
# check_runs LINE: `make check` (or FRESH_CHECK_CMD) RUNS times, each followed by its /tmp row.
check_runs() {
  local k cmd=$1 label=$1 tmp0
  if [ -n "${FRESH_CHECK_CMD:-}" ]; then cmd=$FRESH_CHECK_CMD; label="FRESH_CHECK_CMD ($FRESH_CHECK_CMD)"; fi
  for k in $(seq "$RUNS"); do
    tmp0="$(tmp_list)"
    CHECKS_RUN=$((CHECKS_RUN + 1))
    if step "$label (run $k of $RUNS)" run_check "$cmd"; then CHECKS_OK=$((CHECKS_OK + 1)); fi
    tmp_row "$k" "$tmp0"
    if [ "$MODE" = root ]; then
      echo "fresh-debian-check: make check's stages, run $k:"
      grep -E '^check: ' "$LAST_LOG" | sed 's/^/    /'
    fi
  done
}
if [ "$MODE" = clone ]; then
  check_runs "make check"
  [ "$FAILED" = 0 ]
  exit
fi

# ---- 3. the README's lines, in the root
count_pkgs() { chroot "$R" dpkg-query -W -f='${db:Status-Abbrev}\n' 2>/dev/null | grep -c '^ii'; }
disk_mb() { du -sm --one-file-system "$R" --exclude="$R$PROJ" 2>/dev/null | cut -f1; }

readyz() { curl -sf --noproxy '*' --max-time 2 http://127.0.0.1:9400/readyz >/dev/null 2>&1; }
make_run() { # $1: the README line
  local before after mb0 mb1 pid
  before=$(count_pkgs)
  mb0=$(disk_mb)
  if readyz; then echo "something already answers on 127.0.0.1:9400; stop it first"; return 1; fi
  setsid chroot "$R" /usr/bin/env -i HOME=/root USER=root LOGNAME=root TERM=dumb SHELL=/bin/bash \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    ${http_proxy:+http_proxy=$http_proxy} ${https_proxy:+https_proxy=$https_proxy} \
    /bin/bash -c "cd $PROJ && $1" >>"$STEP_LOG" 2>&1 </dev/null &
  pid=$!
  RUN_PGID=$pid
  # Up to 45 minutes: the install and the build of a fresh machine, on a slow one.
  for _ in $(seq 2700); do
    if readyz; then break; fi
    if ! kill -0 "$pid" 2>/dev/null; then echo "make run exited before /readyz answered"; RUN_PGID=""; return 1; fi
    sleep 1
  done
  readyz || { echo "/readyz did not answer in 45 minutes"; return 1; }
  after=$(count_pkgs)
  mb1=$(disk_mb)
  STEP_NOTE="/readyz answers; installed $((after - before)) packages, +$((mb1 - mb0)) MB on disk"
}

shown() { local s="${1%%#*}"; s="${s%"${s##*[![:space:]]}"}"; echo "${s:-$1}"; } # the line less its comment
for line in "${QUICK[@]}"; do
  case "$line" in
    "make run"*)
      step "README: $(shown "$line")" make_run "$line" || exit 1
      for w in "${WHILE_RUN[@]}"; do
        step "README, beside make run: $(shown "$w")" root_line "$w"
      done
      stop_run
      ;;
    "make check"*)
      check_runs "$(shown "$line")"
      ;;
    *)
      step "README: $(shown "$line")" root_line "$line" || exit 1
      ;;
  esac
done
[ "$FAILED" = 0 ]
