#!/usr/bin/env bash
# The whole test suite: static checks, unit tests and, as root, the
# integration tests that create real namespaces, overlays and containers and
# check that nothing is left behind.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --test
# The images and disks the integration tests boot are built once per
# machine (minutes on a fresh one): beside the builds and static checks
# below, so that the tests find them built instead of building each in its
# turn at the machine while the others wait.
prepare_log=$(mktemp)
fuzz_log=$(mktemp)
# A step that fails ends the script: what runs in the background goes too.
trap 'kill $(jobs -p) 2>/dev/null; rm -f "$prepare_log" "$fuzz_log"' EXIT
VFLEET_TEST_PREPARE=1 go test -count=1 -parallel 2 -timeout 30m -run '^TestPrepareFixtures$' ./internal/testutil >"$prepare_log" 2>&1 &
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
GOARCH=arm64 CGO_ENABLED=0 go build ./...
# deps.sh installed what every guest kind needs: the conformance suite
# fails for a kind this host refuses instead of skipping it.
export VFLEET_TEST_KINDS="${VFLEET_TEST_KINDS:-all}"
# Packages run two at a time: one's build and unit tests beside another's
# integration tests, which take the machine in turn (testutil.RequiresRoot
# holds it for the test, so that leak checks see only their own test's
# work). The timeout counts a package's wait for the machine too.
#
# Beside them, a thousand executions of every fuzz target, seeds first:
# enough to catch a parser that a small change to its seeds makes panic; a
# count, not a duration (see scripts/fuzz.sh); make fuzz is the long pass.
# The suite's wall time is the integration tests' turns at the machine,
# which leave a core idle while they wait on guests, so the fuzzing costs
# it nothing; its output comes after the tests'.
scripts/fuzz.sh 1000x >"$fuzz_log" 2>&1 &
fuzz_pid=$!
status=0
go test -p 2 -count=1 -timeout 60m ./... "$@" || status=$?
prepare_status=0
wait "$prepare_pid" || prepare_status=$?
if [ "$prepare_status" -ne 0 ]; then
  cat "$prepare_log"
  echo "test: building the tests' fixtures failed (exit $prepare_status)" >&2
  status=1
fi
fuzz_status=0
wait "$fuzz_pid" || fuzz_status=$?
cat "$fuzz_log"
if [ "$fuzz_status" -ne 0 ]; then
  echo "test: the fuzz pass failed (exit $fuzz_status)" >&2
  status=1
fi
exit "$status"
