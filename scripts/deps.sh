#!/usr/bin/env bash
# Installs what vfleet needs on a Debian 12 host, idempotently: when every
# package is already there it only checks and returns (well under a second).
set -euo pipefail

# Host packages: OCI runtimes, the image builder (with the recommends it
# uses as root: mount, gpg for the archive keys, libdpkg-perl, arch-test),
# QEMU and e2fsprogs (the base disk) for VM guests and the KVM/TCG probe,
# Open vSwitch for the ovs data path, sqlite3 for poking at results.
# Recommends are otherwise skipped: QEMU's would pull in firmware for
# machines vfleet never emulates.
packages=(runc crun mmdebstrap mount gpg libdpkg-perl arch-test qemu-system-x86 qemu-utils e2fsprogs openvswitch-switch sqlite3 ca-certificates)
# --test adds what only the tests use: a browser that renders the HTML report,
# and a Prometheus server that scrapes the metrics endpoint.
if [ "${1:-}" = "--test" ]; then
  packages+=(chromium prometheus)
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "deps: run as root (sudo $0): packages, namespaces and containers need it" >&2
  exit 1
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # The tests start their own Prometheus on a free loopback port; the
  # package's system service would only hold port 9090 and scrape nothing.
  if [[ " ${missing[*]} " == *" prometheus "* ]] && [ -d /run/systemd/system ]; then
    systemctl disable --now prometheus >/dev/null 2>&1 || true
  fi
  # Each run on the ovs path starts Open vSwitch daemons of its own; the
  # package's system service would only run a switch nobody uses.
  if [[ " ${missing[*]} " == *" openvswitch-switch "* ]] && [ -d /run/systemd/system ]; then
    systemctl disable --now openvswitch-switch ovs-vswitchd ovsdb-server >/dev/null 2>&1 || true
  fi
fi

# Go: the module needs a recent toolchain; Go fetches the exact one go.mod
# names through the module proxy when the installed one is at least 1.21.
if ! command -v go >/dev/null 2>&1; then
  echo "deps: installing Debian's Go (it fetches the toolchain go.mod asks for)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go >/dev/null
fi
goversion=$(go env GOVERSION 2>/dev/null || echo go0)
case "$goversion" in
  go1.1[0-9]*|go1.20*|go1.[0-9]|go1.[0-9].*|go0)
    echo "deps: $goversion is too old to build vfleet; install Go 1.21 or newer" >&2
    exit 1 ;;
esac
