#!/usr/bin/env bash
# The whole test suite: static checks, unit tests and, as root, the
# integration tests that create real namespaces, overlays and containers and
# check that nothing is left behind.
set -euo pipefail
cd "$(dirname "$0")/.."
# One build configuration for every step, the one scripts/build.sh ships
# (static, pure Go, no build paths): the binaries, vet, the arm64 build,
# the tests and the binaries they build share the build cache, so that a
# fresh machine compiles each package once per architecture, not once for
# each step (a whole compile of the module takes a minute and a half of
# both cores).
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath"
scripts/deps.sh --test
# The images and disks the integration tests boot are built once per
# machine (minutes on a fresh one): beside the checks and the tests' first
# packages, so that a test finds them built instead of building each in its
# turn at the machine while the others wait. At the lowest CPU priority:
# a test that measures (a capped container must be found slower) runs
# beside these builds on a fresh machine, and the cluster's and gVisor's
# compiles at an equal share left its comparison undecided; a test that
# needs a fixture not yet built waits for it either way.
prepare_log=$(mktemp)
checks_log=$(mktemp)
# A step that fails ends the script: what runs in the background goes too.
trap 'kill $(jobs -p) 2>/dev/null || true; rm -f "$prepare_log" "$checks_log"' EXIT
VFLEET_TEST_PREPARE=1 nice -n 19 go test -count=1 -parallel 2 -timeout 60m -run '^TestPrepareFixtures$' ./internal/testutil >"$prepare_log" 2>&1 &
prepare_pid=$!

scripts/build.sh --cross

unformatted=$(gofmt -l cmd internal scenarios)
if [ -n "$unformatted" ]; then
  echo "test: not gofmt-formatted:" $unformatted >&2
  exit 1
fi
go vet ./...
# vfleet runs on arm64 hosts too: every package must build there (the
# agent for arm64 guests is built by scripts/build.sh above).
GOARCH=arm64 go build ./...
# Beside the tests, a thousand executions of every fuzz target, seeds
# first: enough to catch a parser that a small change to its seeds makes
# panic; a count, not a duration (see scripts/fuzz.sh); make fuzz is the
# long pass. The suite's wall time is the integration tests' turns at the
# machine, which leave a core idle while they wait on guests; its output
# comes after the tests'. (The compiles above ran beside the tests too, on
# one run: their load at the start left a noisy baseline undecided in
# TestRunBaselineFlagsACPUCapAndPassesAnAA.)
scripts/fuzz.sh 1000x >"$checks_log" 2>&1 &
checks_pid=$!
# deps.sh installed what every guest kind needs: the conformance suite
# fails for a kind this host refuses instead of skipping it.
export VFLEET_TEST_KINDS="${VFLEET_TEST_KINDS:-all}"
status=0
if [ "$#" -gt 0 ]; then
  go test -p 2 -count=1 -timeout 60m ./... "$@" || status=$?
else
  # Two passes. An integration test holds the machine alone (its leak
  # check looks at the whole machine) or shared (testutil.SharesMachine:
  # its check counts only the names it made). A test waiting to hold it
  # alone waits for every shared holder, and so does each test after it in
  # its package: mixed, the alone tests of one package stop its shared
  # ones while another package's shared tests run, and the suite runs one
  # test at a time for minutes. So the tests that share the machine (the
  # awk below finds them by their call; one it misses runs in the first
  # pass, holding the machine as it says) run in a second pass of their
  # own, four packages at a time; the first pass is everything else, two
  # packages at a time: one's build and unit tests beside another's
  # integration test. The timeout counts a package's wait for the machine.
  shared=$(find cmd internal -name '*_test.go' -exec awk '
    /^func Test[A-Za-z0-9_]*\(t \*testing\.T\)/ { name = $2; sub(/\(.*/, "", name) }
    /SharesMachine\(t\)/ && name != "" { print FILENAME "\t" name }' {} + | sort -u)
  tests=$(cut -f2 <<<"$shared" | sort -u | paste -sd'|')
  packages=$(cut -f1 <<<"$shared" | xargs -n1 dirname | sort -u | sed 's|^|./|')
  # go vet ./... ran every check above: go test's own few would be
  # minutes of analysis again on a fresh machine.
  go test -p 2 -count=1 -timeout 60m -vet=off -skip "^($tests)\$" ./... || status=$?
  # shellcheck disable=SC2086 # one argument a package
  go test -p 4 -count=1 -timeout 60m -vet=off -run "^($tests)\$" $packages || status=$?
fi
prepare_status=0
wait "$prepare_pid" || prepare_status=$?
if [ "$prepare_status" -ne 0 ]; then
  cat "$prepare_log"
  echo "test: building the tests' fixtures failed (exit $prepare_status)" >&2
  status=1
fi
checks_status=0
wait "$checks_pid" || checks_status=$?
cat "$checks_log"
if [ "$checks_status" -ne 0 ]; then
  echo "test: the fuzz pass failed (exit $checks_status)" >&2
  status=1
fi
exit "$status"
