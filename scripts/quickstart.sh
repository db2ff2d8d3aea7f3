#!/usr/bin/env bash
# From a fresh Debian 12 machine to a report: install what is missing, build,
# make the guest image (cached), run the default scenario.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
bin/vfleet image build
exec bin/vfleet run "$@"
