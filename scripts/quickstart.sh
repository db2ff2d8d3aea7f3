#!/usr/bin/env bash
# From a fresh Debian 12 machine to a report: install what the default
# scenario needs (and nothing more: other guest kinds and paths are one
# `scripts/deps.sh NEED` away, which a scenario that needs them names),
# build, make the guest image (cached), run the default scenario.
set -euo pipefail
cd "$(dirname "$0")/.."
if command -v go >/dev/null 2>&1; then
  # On a fresh machine compiling vfleet takes nearly two minutes of both
  # cores; the install (the network and dpkg) half a minute, and the image
  # most of a minute and a half of one core (dpkg again), once mmdebstrap
  # is installed: side by side. The image is built by a small program of
  # its own, compiled first, while the install runs; vfleet compiles from
  # then on, and installs its agent into the image below.
  scripts/deps.sh &
  deps=$!
  prebuild=$(mktemp -d)
  trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$prebuild"' EXIT
  CGO_ENABLED=0 go build -trimpath -o "$prebuild/prebuild" ./internal/image/prebuild
  scripts/build.sh &
  build=$!
  wait "$deps"
  "$prebuild/prebuild"
  wait "$build"
  rm -rf "$prebuild"
else
  scripts/deps.sh
  scripts/build.sh
fi
bin/vfleet image build
exec bin/vfleet run "$@"
