#!/usr/bin/env bash
# Runs every Go fuzz target of the module, one after the other: go test
# fuzzes a single target of a single package per invocation.
#
# usage: scripts/fuzz.sh [PER_TARGET]
#   PER_TARGET is go test's -fuzztime: a number of executions (1000000x, the
#   default) or a duration (10m). Prefer a count: with a duration, Go up to
#   1.26 can fail a target with a bare "context deadline exceeded" when the
#   time runs out under load (a race in its fuzzing coordinator, Go issue
#   75804, fixed in 1.27), which is no finding at all.
#
# Inputs that make a target fail are written by go test to the package's
# testdata/fuzz/FuzzName/, where they stay as regression seeds once
# committed. Exits non-zero when any target failed.
set -uo pipefail
cd "$(dirname "$0")/.."

per_target=${1:-1000000x}
if ! [[ $per_target =~ ^[0-9]+x$ || $per_target =~ ^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$ ]]; then
  echo "usage: $0 [PER_TARGET]   e.g. 10m, 30s or 1000000x" >&2
  exit 2
fi

# The machine has two cores, shared with whatever else runs.
parallel=2
# A new interesting input is minimised for up to a minute by default, which
# on a slow parser stalls a short pass; a few seconds keep most of the gain.
minimize=10s

# Only the packages whose tests define a fuzz target are listed, so that
# discovery compiles a handful of test binaries rather than every one.
mapfile -t pkgs < <(grep -rlE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' cmd internal scenarios 2>/dev/null |
  xargs -r -n1 dirname | sort -u | sed 's|^|./|')
if [ ${#pkgs[@]} -eq 0 ]; then
  echo "fuzz: no fuzz targets found" >&2
  exit 1
fi
if ! listing=$(go test -list '^Fuzz' "${pkgs[@]}"); then
  echo "$listing" >&2
  echo "fuzz: could not list the fuzz targets" >&2
  exit 1
fi
# go test -list prints a package's test names, then "ok <import path> <time>".
targets=()
names=()
while read -r line; do
  case $line in
    Fuzz*) names+=("$line") ;;
    "ok "*)
      pkg=$(awk '{print $2}' <<<"$line")
      for n in "${names[@]}"; do targets+=("$pkg $n"); done
      names=()
      ;;
  esac
done <<<"$listing"

log=$(mktemp)
trap 'rm -f "$log"' EXIT
summary=()
passed=0
failed=0
for target in "${targets[@]}"; do
  read -r pkg name <<<"$target"
  short=${pkg#"$(go list -m)/"}
  echo "=== fuzz $name ($short), $per_target"
  start=$SECONDS
  go test -run '^$' -fuzz "^${name}\$" -fuzztime "$per_target" -fuzzminimizetime "$minimize" \
    -parallel "$parallel" "$pkg" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  # The last progress line carries the total: "fuzz: elapsed: 1m2s, execs: N (…/sec), …".
  execs=$(grep -oE '^fuzz: elapsed: [^,]+, execs: [0-9]+' "$log" | tail -n1 | sed 's/.*execs: //')
  result="PASS"
  if [ "$status" -ne 0 ]; then
    result="FAIL"
    if input=$(grep -oE 'Failing input written to [^ ]+' "$log" | tail -n1); then
      result="FAIL ($short/${input#Failing input written to })"
    fi
    failed=$((failed + 1))
  else
    passed=$((passed + 1))
  fi
  line="$result $name ($short): ${execs:-0} execs in $((SECONDS - start))s"
  echo "--- $line"
  summary+=("$line")
done

echo
echo "fuzz summary ($per_target per target):"
printf '  %s\n' "${summary[@]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
