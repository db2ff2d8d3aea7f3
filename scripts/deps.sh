#!/usr/bin/env bash
# Installs what vfleet needs on a Debian 12 host, idempotently: when every
# package is already there it only checks and returns (well under a second).
set -euo pipefail

# Host packages: OCI runtimes (runc, crun, and gVisor's runsc), LXC's
# tools for the lxc kind, the image builder (with the recommends it
# uses as root: mount, gpg for the archive keys, libdpkg-perl, arch-test),
# QEMU and e2fsprogs (the base disk) for VM guests and the KVM/TCG probe,
# Open vSwitch for the ovs data path, passt for the user one, sqlite3 for poking at results,
# ethtool to describe a dedicated NIC (network.uplink) and iproute2.
# Recommends are otherwise skipped: QEMU's would pull in firmware for
# machines vfleet never emulates.
# qemu-system-arm and qemu-user-static (with binfmt-support) are for arm64
# guests on an x86-64 host (and x86-64 guests on an arm64 one): QEMU
# emulates the guest, qemu-user runs its packages' scripts while its image
# is built.
# ovmf and qemu-efi-aarch64 are the UEFI firmware of users' disks that
# boot through their own boot loader, genisoimage makes their cloud-init
# seed.
# gcc and libc6-dev build vfleet's own programs (STREAM, the pinned
# context switch) into the host architecture's image, the other
# architecture's cross compiler and C library into its image.
# libvirt-daemon-system (and libvirt-clients' virsh) run libvirt-managed
# VMs (guests[].libvirt).
packages=(runc crun runsc lxc mmdebstrap mount gpg libdpkg-perl arch-test qemu-system-x86 qemu-system-arm qemu-user-static binfmt-support qemu-utils e2fsprogs ovmf qemu-efi-aarch64 genisoimage libvirt-daemon-system libvirt-clients openvswitch-switch passt sqlite3 ca-certificates gcc libc6-dev ethtool iproute2)
case "$(dpkg --print-architecture)" in
  amd64) packages+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross) ;;
  arm64) packages+=(gcc-x86-64-linux-gnu libc6-dev-amd64-cross) ;;
esac
# --test adds what only the tests use: a browser that renders the HTML report,
# a Prometheus server that scrapes the metrics endpoint, what makes a
# partitioned UEFI disk (sfdisk, mkfs.vfat, mcopy) of a test image,
# OpenSSH's server, which the tests' remote machine runs in a namespace, and
# the programs a remote peer runs, which that machine, sharing this host's
# file system, finds here: iperf3 and sockperf (ethtool and iproute2 are
# this host's own).
if [ "${1:-}" = "--test" ]; then
  packages+=(chromium prometheus fdisk dosfstools mtools openssh-server iperf3 sockperf)
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
  # vfleet wires LXC guests into its own data paths; the package's lxc-net
  # service would only add a bridge (lxcbr0) and a DHCP server nobody uses.
  if [[ " ${missing[*]} " == *" lxc "* ]] && [ -d /run/systemd/system ]; then
    systemctl disable --now lxc-net >/dev/null 2>&1 || true
  fi
  # Each run on the ovs path starts Open vSwitch daemons of its own; the
  # package's system service would only run a switch nobody uses.
  if [[ " ${missing[*]} " == *" openvswitch-switch "* ]] && [ -d /run/systemd/system ]; then
    systemctl disable --now openvswitch-switch ovs-vswitchd ovsdb-server >/dev/null 2>&1 || true
  fi
fi

# libvirt: vfleet puts a libvirt-managed VM's NIC on the path it built and
# starts no libvirt network. The package's `default` network (virbr0,
# 192.168.122.0/24, with dnsmasq) may be marked to autostart: unmark it,
# and stop it where a daemon already runs it.
if dpkg-query -W -f='${Status}' libvirt-daemon-system 2>/dev/null | grep -q 'install ok installed'; then
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
