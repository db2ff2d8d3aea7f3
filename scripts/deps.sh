#!/usr/bin/env bash
# Installs what vfleet needs on a Debian 12 host, per need and idempotently:
# when every package of the asked needs is already there it only checks and
# returns (well under a second).
#
# usage: scripts/deps.sh [NEED|PACKAGE ...]
#   no argument     what the default scenario needs (the bare host and runc)
#   NEED            one of the needs below, e.g. scripts/deps.sh lxc vm
#   PACKAGE         a Debian package of a need, e.g. qemu-system-x86: its
#                   whole need is installed (a refused scenario names the package)
#   all             every need: every guest kind, data path and architecture
#   --test          all, and what only the tests use
#
# A need installs whole or not at all (apt-get installs atomically), with
# the host set-up it asks for (a service that must not run, an emulator
# registered), so a host is never left half-ready for a guest kind.
set -euo pipefail

# The needs, each a list of Debian packages. Recommends are skipped:
# QEMU's would pull in firmware for machines vfleet never emulates.
declare -A need=(
  # The default scenario: the image builder (with the recommends it uses as
  # root: mount, gpg for the archive keys, libdpkg-perl), gcc and libc6-dev
  # for vfleet's own programs (STREAM, CacheBench's sweep and the rest) compiled
  # into the image, runc for the container, iproute2.
  [base]="runc mmdebstrap mount gpg libdpkg-perl ca-certificates gcc libc6-dev iproute2"
  [crun]="crun"
  [gvisor]="runsc"
  [lxc]="lxc"
  # VM guests of the host's architecture: QEMU, its disk tool, e2fsprogs
  # (the base disk), UEFI firmware and genisoimage (users' disks that boot
  # through their own boot loader, with a cloud-init seed).
  [vm]="qemu-system-x86 qemu-utils e2fsprogs ovmf genisoimage"
  # Guests of the other architecture: QEMU emulates them, qemu-user runs
  # their packages' scripts while the image is built (registered with
  # binfmt_misc below), a cross compiler builds vfleet's programs for them.
  [cross]="qemu-system-arm qemu-efi-aarch64 qemu-user-static binfmt-support arch-test"
  [libvirt]="libvirt-daemon-system libvirt-clients"
  [ovs]="openvswitch-switch"
  [passt]="passt"
  # A dedicated NIC under a data path (network.uplink) is described by ethtool.
  [nic]="ethtool"
  [sqlite]="sqlite3"
  # Only a change to the eBPF fast paths' C needs the compiler: their
  # objects are generated and committed. Not part of all.
  [bpf]="clang"
  # What only the tests use: a browser that renders the HTML report, a
  # Prometheus server that scrapes the metrics endpoint, what makes a
  # partitioned UEFI disk (sfdisk, mkfs.vfat, mcopy) of a test image,
  # OpenSSH's server, which the tests' remote machine runs in a namespace,
  # the programs a remote peer runs, which that machine, sharing this
  # host's file system, finds here: iperf3 and sockperf, and LAME, which
  # the lame workload's test runs here under vfleet's own encoder timer;
  # what the one-node Kubernetes cluster of the pod kind's tests runs
  # beside the programs it builds (scripts/k8s-fixture.sh): containerd,
  # etcd, the CNI plugins, openssl for its certificates.
  [test]="chromium prometheus fdisk dosfstools mtools openssh-server iperf3 sockperf lame containerd etcd-server containernetworking-plugins openssl"
)
case "$(dpkg --print-architecture)" in
  amd64) need[cross]+=" gcc-aarch64-linux-gnu libc6-dev-arm64-cross" ;;
  arm64)
    need[vm]="qemu-system-arm qemu-utils e2fsprogs qemu-efi-aarch64 genisoimage"
    need[cross]="qemu-system-x86 ovmf qemu-user-static binfmt-support arch-test gcc-x86-64-linux-gnu libc6-dev-amd64-cross" ;;
esac
order=(base crun gvisor lxc vm cross libvirt ovs passt nic sqlite)

usage() {
  echo "usage: $0 [NEED|PACKAGE ...]   NEED: ${order[*]} bpf all (--test: all and the tests' own)" >&2
  exit 2
}

wanted=()
if [ $# -eq 0 ]; then
  wanted=(base)
fi
for arg in "$@"; do
  case $arg in
    --test) wanted+=("${order[@]}" test) ;;
    all) wanted+=("${order[@]}") ;;
    -h|--help) usage ;;
    *)
      if [ -n "${need[$arg]+x}" ]; then
        wanted+=("$arg")
        continue
      fi
      found=""
      for n in "${order[@]}" bpf test; do
        if [[ " ${need[$n]} " == *" $arg "* ]]; then found=$n; break; fi
      done
      if [ -z "$found" ]; then
        echo "deps: $arg is neither a need nor a package of one" >&2
        usage
      fi
      wanted+=("$found") ;;
  esac
done

if [ "$(id -u)" -ne 0 ]; then
  echo "deps: run as root (sudo $0): packages, namespaces and containers need it" >&2
  exit 1
fi

# apt-get update once per call, and only when something is to be installed.
updated=""
apt_update() {
  if [ -z "$updated" ]; then apt-get update -qq; updated=1; fi
}

has() { [[ " ${wanted[*]} " == *" $1 "* ]]; }

packages=()
for n in $(printf '%s\n' "${wanted[@]}" | sort -u); do
  read -ra p <<<"${need[$n]}"
  packages+=("${p[@]}")
done

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt_update
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # The tests start their own Prometheus on a free loopback port; the
  # package's system service would only hold port 9090 and scrape nothing.
  # vfleet wires LXC guests into its own data paths; the package's lxc-net
  # service would only add a bridge (lxcbr0) and a DHCP server nobody uses.
  # Each run on the ovs path starts Open vSwitch daemons of its own; the
  # package's system service would only run a switch nobody uses.
  if [ -d /run/systemd/system ]; then
    for pair in "prometheus:prometheus" "lxc:lxc-net" "openvswitch-switch:openvswitch-switch ovs-vswitchd ovsdb-server"; do
      if [[ " ${missing[*]} " == *" ${pair%%:*} "* ]]; then
        # shellcheck disable=SC2086
        systemctl disable --now ${pair#*:} >/dev/null 2>&1 || true
      fi
    done
  fi
fi

# libvirt: vfleet puts a libvirt-managed VM's NIC on the path it built and
# starts no libvirt network. The package's `default` network (virbr0,
# 192.168.122.0/24, with dnsmasq) may be marked to autostart: unmark it,
# and stop it where a daemon already runs it.
if has libvirt; then
  rm -f /etc/libvirt/qemu/networks/autostart/default.xml
  if virsh -c qemu:///system net-info default 2>/dev/null | grep -q '^Active: *yes'; then
    virsh -q -c qemu:///system net-destroy default >/dev/null 2>&1 || true
  fi
  # libvirt checks /dev/kvm for the user its QEMU runs as (libvirt-qemu,
  # of group kvm), which udev's rule makes root:kvm 0660. Where no udev
  # applied it (a container) /dev/kvm stays root's only: libvirt then
  # finds KVM gone since it probed QEMU and probes QEMU's capabilities
  # again (a minute under TCG) for every domain it starts.
  if [ -c /dev/kvm ] && [ "$(stat -c %G /dev/kvm)" = root ] && getent group kvm >/dev/null; then
    chgrp kvm /dev/kvm && chmod 0660 /dev/kvm
  fi
  # libvirt gives each QEMU a private /dev (a mount namespace), which a
  # container cannot make ("Unable to move ... ptmx mount"): there, QEMU
  # sees the host's /dev, as the QEMU vfleet starts itself does.
  # A daemon already running reads it at its next start.
  if { [ -f /.dockerenv ] || [ -f /run/.containerenv ]; } && ! grep -q '^namespaces' /etc/libvirt/qemu.conf; then
    echo 'namespaces = [ ]' >> /etc/libvirt/qemu.conf
  fi
fi

# The other architecture's image is built by running its programs under
# qemu-user, which the kernel's binfmt_misc must hand them to. Where no
# init mounted binfmt_misc and registered the emulators, do it (until the
# next boot).
if has cross; then
  case "$(dpkg --print-architecture)" in
    amd64) other=arm64 emulator=qemu-aarch64 ;;
    arm64) other=amd64 emulator=qemu-x86_64 ;;
    *) other="" ;;
  esac
  if [ -n "$other" ] && ! arch-test "$other" >/dev/null 2>&1; then
    mountpoint -q /proc/sys/fs/binfmt_misc || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>/dev/null || true
    update-binfmts --enable "$emulator" >/dev/null 2>&1 || true
    arch-test "$other" >/dev/null 2>&1 || echo "deps: this host cannot run $other programs ($emulator not registered with binfmt_misc): building $other guest images will fail" >&2
  fi
fi

# Go: the module needs a recent toolchain; Go fetches the exact one go.mod
# names through the module proxy when the installed one is at least 1.21.
if ! command -v go >/dev/null 2>&1; then
  echo "deps: installing Debian's Go (it fetches the toolchain go.mod asks for)"
  apt_update
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go >/dev/null
fi
goversion=$(go env GOVERSION 2>/dev/null || echo go0)
case "$goversion" in
  go1.1[0-9]*|go1.20*|go1.[0-9]|go1.[0-9].*|go0)
    echo "deps: $goversion is too old to build vfleet; install Go 1.21 or newer" >&2
    exit 1 ;;
esac
