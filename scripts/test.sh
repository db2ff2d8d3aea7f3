#!/usr/bin/env bash
# The whole test suite: static checks, unit tests and, as root, the
# integration tests that create real namespaces, overlays and containers and
# check that nothing is left behind.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --test
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
fuzz_log=$(mktemp)
trap 'rm -f "$fuzz_log"' EXIT
scripts/fuzz.sh 1000x >"$fuzz_log" 2>&1 &
fuzz_pid=$!
status=0
go test -p 2 -count=1 -timeout 60m ./... "$@" || status=$?
fuzz_status=0
wait "$fuzz_pid" || fuzz_status=$?
cat "$fuzz_log"
if [ "$fuzz_status" -ne 0 ]; then
  echo "test: the fuzz pass failed (exit $fuzz_status)" >&2
  status=1
fi
exit "$status"
