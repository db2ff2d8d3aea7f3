#!/usr/bin/env bash
# From a fresh Debian 12 machine to a report: install what the default
# scenario needs (and nothing more: other guest kinds and paths are one
# `scripts/deps.sh NEED` away, which a scenario that needs them names),
# build, make the guest image (cached), run the default scenario.
set -euo pipefail
cd "$(dirname "$0")/.."
if command -v go >/dev/null 2>&1; then
  # On a fresh machine compiling vfleet takes a minute and a half of both
  # cores, and the image most of a minute of one (dpkg), after the install
  # (the network and the disk): side by side. The image is built by a small
  # program of its own, compiled first, while vfleet compiles; vfleet
  # installs its agent into it below.
  scripts/deps.sh &
  deps=$!
  prebuild=$(mktemp -d)
  trap 'rm -rf "$prebuild"' EXIT
  CGO_ENABLED=0 go build -trimpath -o "$prebuild/prebuild" ./internal/image/prebuild
  wait "$deps"
  "$prebuild/prebuild" &
  image=$!
  scripts/build.sh
  wait "$image"
  rm -rf "$prebuild"
else
  scripts/deps.sh
  scripts/build.sh
fi
bin/vfleet image build
exec bin/vfleet run "$@"
