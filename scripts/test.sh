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
go test -p 2 -count=1 -timeout 60m ./... "$@"
# A thousand executions of every fuzz target, seeds first: enough to catch
# a parser that a small change to its seeds makes panic; a count, not a
# duration (see scripts/fuzz.sh). make fuzz is the long pass.
scripts/fuzz.sh 1000x
