#!/usr/bin/env bash
# From a fresh Debian 12 machine to a report: install what the default
# scenario needs (and nothing more: other guest kinds and paths are one
# `scripts/deps.sh NEED` away, which a scenario that needs them names),
# build, make the guest image (cached), run the default scenario.
set -euo pipefail
cd "$(dirname "$0")/.."
if command -v go >/dev/null 2>&1; then
  # Installing is mostly waiting on the network and the disk, building is
  # the CPU: side by side.
  scripts/deps.sh &
  deps=$!
  scripts/build.sh
  wait "$deps"
else
  scripts/deps.sh
  scripts/build.sh
fi
bin/vfleet image build
exec bin/vfleet run "$@"
