#!/usr/bin/env bash
# Builds vfleet and its agent into bin/. The agent is static so that the same
# binary runs in every guest image; vfleet is pure Go too (its SQLite driver
# needs no cgo), so both build without a C toolchain.
#
# usage: scripts/build.sh [--cross]
#   --cross  also the agent of every architecture VM guests may have, for
#            images and users' disks of an architecture the host emulates
#            (vfleet-agent-ARCH), and vfleet itself for each, which
#            `vfleet run --on` copies to a machine of that architecture
#            (vfleet-ARCH)
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  ""|--cross) ;;
  *) echo "usage: $0 [--cross]" >&2; exit 2 ;;
esac
mkdir -p bin
export CGO_ENABLED=0
go build -trimpath -o bin/vfleet ./cmd/vfleet
go build -trimpath -o bin/vfleet-agent ./cmd/vfleet-agent
if [ "${1:-}" = --cross ]; then
  for arch in amd64 arm64; do
    GOARCH=$arch go build -trimpath -o "bin/vfleet-agent-$arch" ./cmd/vfleet-agent
    GOARCH=$arch go build -trimpath -o "bin/vfleet-$arch" ./cmd/vfleet
  done
fi
