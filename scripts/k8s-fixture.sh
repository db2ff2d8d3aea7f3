#!/usr/bin/env bash
# A one-node Kubernetes fixture: containerd on its own socket and
# directories, etcd, an API server, a controller manager (namespaces,
# service accounts, garbage collection), a scheduler, and a kubelet
# registered as the node "localhost" that runs one static pod of vfleet's
# guest image, vfleet's agent as its container, under runc, on the host's
# network; other pods get addresses of their own on a bridge (Debian's CNI
# plugins). Two RuntimeClasses: runc, and gvisor (gVisor's runsc and its
# containerd shim, built from the Go module proxy: Debian's runsc comes
# without the shim). Everything listens on loopback only. vfleet's pod kind and its
# tests run over it (docs/kubernetes.md).
#
# Nothing is pulled from a registry: the kubelet and the API server are
# built from the Go module proxy (once per version, cached), the sandbox
# ("pause") image is a
# small Go program packaged here, and the agent's image is vfleet's own
# guest image packaged as an OCI image; both are imported into containerd.
#
# usage: scripts/k8s-fixture.sh build|start|stop|status
#   build   build what start needs and is not cached, start nothing
#   start   build what is missing, start containerd and the kubelet, wait
#           until the pod is Running and its agent answers (idempotent);
#           the agent image's reference is then in $VFLEET_K8S_DIR/agent-image
#   stop    stop them and remove everything they made: processes, mounts,
#           cgroups, kernel settings the kubelet changed, state directories
#           (idempotent; the build cache is kept)
#   status  whether the fixture runs, and the pod's phase
#
# Needs root, go, tar, openssl, and Debian's containerd, runc, etcd-server
# and containernetworking-plugins. Environment:
#   K8S_VERSION      Kubernetes version to build (default 1.34.4: the last
#                    minor that runs on a cgroup v1 host without opting in)
#   GVISOR_VERSION   gvisor.dev/gvisor module version to build runsc and
#                    its shim from (its Go branch, by pseudo-version)
#   VFLEET_K8S_CACHE build cache (default /var/cache/vfleet-k8s)
#   VFLEET_K8S_DIR   the fixture's state (default /var/lib/vfleet-k8s)
#   VFLEET_STATE_DIR where vfleet keeps its guest image (vfleet's default)
#   VFLEET_K8S_ROOTFS a guest image's root file system to run as the agent's
#                    image instead of the one `vfleet image build` makes
#                    (the tests' image, with the agent they built)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

version=${K8S_VERSION:-1.34.4}
cache=${VFLEET_K8S_CACHE:-/var/cache/vfleet-k8s}
dir=${VFLEET_K8S_DIR:-/var/lib/vfleet-k8s}
bindir=$cache/v$version
gvisor_version=${GVISOR_VERSION:-v0.0.0-20260905035102-160fafc42237}
gvisor_bin=$cache/gvisor/$gvisor_version
# The helpers' sources are in this script: a changed script builds them anew.
tools=$cache/tools/$(sha256sum "$repo/scripts/k8s-fixture.sh" | cut -c1-12)
sock=$dir/containerd/containerd.sock
pause_ref=vfleet.local/k8s-pause:1
pod=vfleet-agent
# The kubelet's read-only port, on loopback only: the pod's status without
# the exec and attach endpoints of its authenticated port, which takes only
# the API server's client certificate.
status_url=http://127.0.0.1:10255/pods
api=https://127.0.0.1:16443
etcd_client=http://127.0.0.1:23790
etcd_peer=http://127.0.0.1:23800
# The node's name: the API server reaches a kubelet (exec, logs) at the
# address its node reports first among these types, and a node named
# localhost is reached on loopback, where this kubelet listens.
node=localhost
# The sysctls the kubelet sets at start (its "kernel tunables"); stop puts
# back what they were.
sysctls="vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes"
# Paths outside the fixture's directory that its programs make whatever
# they are told: containerd 1.6's shims' sockets, the kubelet's links to
# every container's log, its device plugin socket, the CNI library's cache
# of each pod's network. stop removes those that start found missing.
outside="/run/containerd /var/log/containers /var/lib/kubelet /var/lib/cni"
# The pods' network: a bridge in this host's namespace, its addresses from
# the ranges set aside for tests, no masquerading (no iptables rule).
bridge=vfk8s0
pod_cidr=198.19.1.0/24
pod_gateway=198.19.1.1
cni_bin=/usr/lib/cni
# The kube programs the fixture builds and runs.
kube_programs="kubelet kube-apiserver kube-controller-manager kube-scheduler"

log() { printf 'k8s-fixture: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

usage() {
  echo "usage: $0 start|stop|status" >&2
  exit 2
}

alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# build_kube builds the kubelet and the API server of $version once: a
# scratch module that
# requires k8s.io/kubernetes and points each staging module (required as
# v0.0.0 and replaced by a directory in kubernetes' own go.mod) at its
# published v0.MINOR.PATCH.
build_kube() {
  local c missing=
  for c in $kube_programs; do [ -x "$bindir/$c" ] || missing+=" $c"; done
  [ -n "$missing" ] || return 0
  local src=$cache/src/kube-$version staging
  staging="v0.${version#*.}"
  mkdir -p "$src" "$bindir"
  log "building$missing v$version (minutes on a cold module cache)"
  (
    cd "$src"
    local gomod
    gomod=$(go mod download -json "k8s.io/kubernetes@v$version" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')
    {
      echo "module vfleet.local/k8s-fixture/kube"
      echo
      echo "go 1.24"
      echo
      echo "require k8s.io/kubernetes v$version"
      echo
      echo "replace ("
      sed -n '/^replace (/,/^)/s#^\s*\(k8s.io/[a-z-]*\) => ./staging/.*#\t\1 => \1 '"$staging"'#p' "$gomod"
      echo ")"
    } >go.mod
    local pkgs=() out
    for c in $missing; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
    # One go command for them all: one resolution of the module graph,
    # and their links side by side.
    go get "${pkgs[@]/%/@v$version}"
    out=$(mktemp -d "$bindir/.build.XXXXXX")
    CGO_ENABLED=0 go build -trimpath -o "$out/" \
      -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=v$version -X k8s.io/component-base/version.gitMajor=${version%%.*} -X k8s.io/component-base/version.gitMinor=$(echo "$version" | cut -d. -f2)" \
      "${pkgs[@]}"
    for c in $missing; do mv "$out/$c" "$bindir/$c"; done
    rmdir "$out"
  )
}

# build_gvisor builds gVisor's runsc and its containerd shim of
# $gvisor_version once, in a scratch module of their own.
build_gvisor() {
  [ -x "$gvisor_bin/runsc" ] && [ -x "$gvisor_bin/containerd-shim-runsc-v1" ] && [ -x "$gvisor_bin/containerd-shim-runsc-v1.real" ] && return
  local src=$cache/src/gvisor-$gvisor_version
  mkdir -p "$src" "$gvisor_bin"
  log "building gVisor's runsc and containerd shim $gvisor_version (minutes on a cold module cache)"
  (
    cd "$src"
    printf 'module vfleet.local/k8s-fixture/gvisor\n\ngo 1.24\n' >go.mod
    go get "gvisor.dev/gvisor/runsc@$gvisor_version" "gvisor.dev/gvisor/shim@$gvisor_version"
    # The module cache is read-only to builds: a copy of the module, with
    # the shim taught what this kind of host does.
    rm -rf gvisor
    cp -r "$(go list -m -f '{{.Dir}}' gvisor.dev/gvisor)" gvisor
    chmod -R u+w gvisor
    # 1. The shim lowers its own OOM score below its parent's, which takes
    # CAP_SYS_RESOURCE; hosts that withhold it even from root (sandboxed
    # VMs, as the containerd config below says) refuse, and the shim
    # failed every pod. The refusal is ignored, as containerd ignores it for
    # its own shims where it is not privileged.
    sed -i 's/\(SetOOMScore(cmd.Process.Pid, oomScoreMax); err != nil\) {/\1 \&\& !os.IsPermission(err) {/' gvisor/pkg/shim/v1/manager.go
    grep -q 'oomScoreMax); err != nil && !os.IsPermission(err)' gvisor/pkg/shim/v1/manager.go ||
      die "gVisor $gvisor_version: the shim sets its OOM score otherwise than this script patches"
    # 2. It watches each sandbox's cgroup for OOM kills, and fails the pod
    # where containerd's cgroup library cannot place the sandbox's v1
    # cgroups (this host's hybrid layout: containerd logs the same error
    # for every runc container, and goes on). It goes on too, without OOM
    # events.
    perl -0pi -e 's/return nil, fmt\.Errorf\("loading cgroup for %d: %w", pid, err\)\n\t\t\}\n\t\t\/\/ Register the sandbox cgroup with the OOM poller using this\n\t\t\/\/ container.s id\n\t\tif err := s\.oomPoller/log.L.Warningf("loading cgroup for %d: %v: no OOM events", pid, err)\n\t\t} else if err := s.oomPoller/' gvisor/pkg/shim/v1/runsc/service.go
    grep -q 'no OOM events", pid, err)' gvisor/pkg/shim/v1/runsc/service.go ||
      die "gVisor $gvisor_version: the shim loads a sandbox's cgroup otherwise than this script patches"
    go mod edit -replace gvisor.dev/gvisor=./gvisor
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$gvisor_bin/runsc.tmp" gvisor.dev/gvisor/runsc
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$gvisor_bin/containerd-shim-runsc-v1.tmp" gvisor.dev/gvisor/shim
    mv "$gvisor_bin/runsc.tmp" "$gvisor_bin/runsc"
    mv "$gvisor_bin/containerd-shim-runsc-v1.tmp" "$gvisor_bin/containerd-shim-runsc-v1.real"
  )
  # containerd 1.6 takes what a shim's start prints as its address alone;
  # this shim, built on containerd 2's library, prints its bootstrap
  # parameters as JSON, the address among them. The rest of the protocol
  # (the task API over ttrpc) is the same.
  cat >"$gvisor_bin/containerd-shim-runsc-v1" <<'EOF'
#!/bin/sh
eval "last=\${$#}"
if [ "$last" = start ]; then
  out=$("$0.real" "$@") || exit
  printf '%s' "$out" | sed -n 's/.*"address":"\([^"]*\)".*/\1/p'
  exit
fi
exec "$0.real" "$@"
EOF
  chmod +x "$gvisor_bin/containerd-shim-runsc-v1"
}

# build_tools builds the pause program and the fixture's helper (image
# packing, the pod's status, the agent's hello) in their own module, apart
# from kubernetes' so neither's dependencies move the other's.
build_tools() {
  [ -x "$tools/pause" ] && [ -x "$tools/fixture" ] && return
  local src=$cache/src/tools
  mkdir -p "$src/pause" "$src/fixture" "$tools"
  cat >"$src/pause/main.go" <<'EOF'
// Command pause holds a pod's namespaces open until it is told to stop.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
}
EOF
  cat >"$src/fixture/main.go" <<'EOF'
// Command fixture is the Kubernetes fixture's helper:
//
//	fixture image LAYERS REF OUT.tar ENTRYPOINT...  an image of the layers (tar files, plain or
//	                               gzip'd, joined by ':', the lowest first) as a docker archive
//	fixture pod URL NAME TIMEOUT   wait until the pod list at URL (the kubelet's or the API server's,
//	                               with the bearer token in $FIXTURE_TOKEN) shows the pod Running, all containers ready
//	fixture hello SOCKET TIMEOUT   print the first line vfleet's agent says on its socket
//	fixture node URL TIMEOUT       wait until the node at URL (the API server's, the token in
//	                               $FIXTURE_TOKEN) is ready and has no taint: pods may go there
//	fixture post URL JSON          create the object JSON at URL (the token in $FIXTURE_TOKEN);
//	                               one that exists already is left as it is
package main

import (
	"bufio"
	"compress/gzip"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	var err error
	switch {
	case len(os.Args) >= 6 && os.Args[1] == "image":
		err = image(os.Args[2], os.Args[3], os.Args[4], os.Args[5:])
	case len(os.Args) == 5 && os.Args[1] == "pod":
		err = waitPod(os.Args[2], os.Args[3], os.Args[4])
	case len(os.Args) == 4 && os.Args[1] == "hello":
		err = hello(os.Args[2], os.Args[3])
	case len(os.Args) == 4 && os.Args[1] == "node":
		err = waitNode(os.Args[2], os.Args[3])
	case len(os.Args) == 4 && os.Args[1] == "post":
		err = post(os.Args[2], os.Args[3])
	default:
		fmt.Fprintln(os.Stderr, "usage: fixture image LAYER REF OUT ENTRYPOINT... | pod URL NAME TIMEOUT | hello SOCKET TIMEOUT | node URL TIMEOUT | post URL JSON")
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fixture:", err)
		os.Exit(1)
	}
}

func image(layerPaths, ref, out string, entrypoint []string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	var layers []v1.Layer
	for _, p := range strings.Split(layerPaths, ":") {
		layer, err := tarball.LayerFromFile(p, tarball.WithCompressionLevel(gzip.BestSpeed))
		if err != nil {
			return err
		}
		layers = append(layers, layer)
	}
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Config.Entrypoint = entrypoint
	cfg.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	return tarball.WriteToFile(out, tag, img)
}

type podList struct {
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Status struct {
			Phase             string `json:"phase"`
			ContainerStatuses []struct {
				Name  string `json:"name"`
				Ready bool   `json:"ready"`
				Image string `json:"image"`
				State map[string]json.RawMessage
			} `json:"containerStatuses"`
		} `json:"status"`
	} `json:"items"`
}

// poll asks state every half second until it says done, for at most
// timeout; it returns the last state it said.
func poll(timeout string, state func() (string, bool)) (string, error) {
	d, err := time.ParseDuration(timeout)
	if err != nil {
		return "", err
	}
	deadline := time.Now().Add(d)
	last := "no answer"
	for time.Now().Before(deadline) {
		s, done := state()
		if done {
			return s, nil
		}
		last = s
		time.Sleep(500 * time.Millisecond)
	}
	return "", fmt.Errorf("not after %s: %s", timeout, last)
}

// waitPod polls a pod list: the kubelet's carries a static pod's status as
// the kubelet keeps it, the API server's that of its mirror pod.
func waitPod(url, pod, timeout string) error {
	s, err := poll(timeout, func() (string, bool) { return podState(url, pod) })
	if err != nil {
		return fmt.Errorf("pod %s running: %w", pod, err)
	}
	fmt.Println(s)
	return nil
}

// client trusts the API server's self-signed certificate: it is the
// fixture's own, on loopback, and the token is good only for the fixture.
var client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

func podState(url, pod string) (string, bool) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err.Error(), false
	}
	if t := os.Getenv("FIXTURE_TOKEN"); t != "" {
		req.Header.Set("Authorization", "Bearer "+t)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err.Error(), false
	}
	defer resp.Body.Close()
	var l podList
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		return err.Error(), false
	}
	for _, p := range l.Items {
		if p.Metadata.Name != pod {
			continue
		}
		s := fmt.Sprintf("pod %s: %s", p.Metadata.Name, p.Status.Phase)
		ready := len(p.Status.ContainerStatuses) > 0
		for _, c := range p.Status.ContainerStatuses {
			state := "?"
			for k := range c.State {
				state = k
			}
			s += fmt.Sprintf("; container %s (%s) %s ready=%t", c.Name, c.Image, state, c.Ready)
			ready = ready && c.Ready
		}
		return s, p.Status.Phase == "Running" && ready
	}
	return "pod not listed", false
}

type node struct {
	Spec struct {
		Taints []json.RawMessage `json:"taints"`
	} `json:"spec"`
	Status struct {
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		} `json:"conditions"`
	} `json:"status"`
}

// waitNode polls a node until it is ready and untainted: a kubelet
// registers its node tainted not-ready, and the controller manager lifts
// the taint a moment after the node says it is ready.
func waitNode(url, timeout string) error {
	_, err := poll(timeout, func() (string, bool) {
		s := nodeState(url)
		return s, s == ""
	})
	if err != nil {
		return fmt.Errorf("node %s schedulable: %w", url, err)
	}
	return nil
}

// nodeState says why pods may not go to the node yet, "" once they may.
func nodeState(url string) string {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+os.Getenv("FIXTURE_TOKEN"))
	resp, err := client.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var n node
	if err := json.NewDecoder(resp.Body).Decode(&n); err != nil {
		return err.Error()
	}
	ready := false
	for _, c := range n.Status.Conditions {
		ready = ready || c.Type == "Ready" && c.Status == "True"
	}
	switch {
	case !ready:
		return "not ready"
	case len(n.Spec.Taints) > 0:
		return fmt.Sprintf("tainted %s", n.Spec.Taints)
	}
	return ""
}

func post(url, object string) error {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(object))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+os.Getenv("FIXTURE_TOKEN"))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 || resp.StatusCode == http.StatusConflict {
		return nil
	}
	b, _ := io.ReadAll(resp.Body)
	return fmt.Errorf("POST %s: %s: %s", url, resp.Status, b)
}

func hello(socket, timeout string) error {
	d, err := time.ParseDuration(timeout)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(d)
	for {
		line, err := helloOnce(socket, deadline)
		if err == nil {
			fmt.Print(line)
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(time.Second)
	}
}

func helloOnce(socket string, deadline time.Time) (string, error) {
	c, err := net.DialTimeout("unix", socket, time.Until(deadline))
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(deadline)
	return bufio.NewReader(c).ReadString('\n')
}
EOF
  log "building the pause program and the fixture's helper"
  (
    cd "$src"
    [ -f go.mod ] || go mod init vfleet.local/k8s-fixture/tools >/dev/null 2>&1
    # The go-containerregistry vfleet builds with.
    go get "github.com/google/go-containerregistry@$(cd "$repo" && go list -m -f '{{.Version}}' github.com/google/go-containerregistry)"
    go mod tidy
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tools/pause" ./pause
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tools/fixture" ./fixture
  )
}

# pack makes a one-layer image of a directory: pack DIR REF OUT ENTRYPOINT...
pack() {
  local from=$1 ref=$2 out=$3
  shift 3
  [ -s "$out" ] && return
  log "packing $from as $ref"
  tar --numeric-owner --xattrs -C "$from" -cf "$out.layer" .
  "$tools/fixture" image "$out.layer" "$ref" "$out.tmp" "$@"
  rm -f "$out.layer"
  mv "$out.tmp" "$out"
}

# pack_agent makes the agent's image of a root file system in two layers:
# the tree without the agent, compressed once per image (the agent changes
# with every build of vfleet, the image seldom; containerd then keeps the
# lower layer it has), and the agent: pack_agent ROOTFS BASE.tar.gz REF OUT
pack_agent() {
  local from=$1 base=$2 ref=$3 out=$4 agent=usr/local/bin/vfleet-agent
  [ -s "$out" ] && return
  if ! [ -s "$base" ]; then
    log "packing $from without its agent"
    tar --numeric-owner --xattrs -C "$from" --exclude "./$agent" -c . | gzip -1 >"$base.tmp"
    mv "$base.tmp" "$base"
  fi
  log "packing its agent as $ref"
  tar --numeric-owner -C "$from" -cf "$out.agent" "./$agent"
  "$tools/fixture" image "$base:$out.agent" "$ref" "$out.tmp" "/$agent"
  rm -f "$out.agent"
  mv "$out.tmp" "$out"
}

# agent_image packs vfleet's guest image, as `vfleet image build` makes it
# (cached), keyed by its recipe hash and the agent in it.
agent_image() {
  local line hash rootfs sum
  if [ -n "${VFLEET_K8S_ROOTFS:-}" ]; then
    rootfs=$VFLEET_K8S_ROOTFS
    [ -x "$rootfs/usr/local/bin/vfleet-agent" ] || die "VFLEET_K8S_ROOTFS=$rootfs has no /usr/local/bin/vfleet-agent"
    hash=$(basename "$(dirname "$rootfs")" | cut -c1-12)
  else
    scripts/build.sh
    line=$(bin/vfleet image build)
    hash=$(echo "$line" | sed -n 's/^image \([0-9a-f]*\): \(.*\) (built.*/\1/p')
    rootfs=$(echo "$line" | sed -n 's/^image \([0-9a-f]*\): \(.*\) (built.*/\2/p')
    [ -d "$rootfs" ] || die "vfleet image build said \"$line\": no root file system named"
  fi
  sum=$(sha256sum "$rootfs/usr/local/bin/vfleet-agent" | cut -c1-12)
  agent_ref=vfleet.local/vfleet-agent:$hash-$sum
  agent_tar=$cache/images/agent-$hash-$sum.tar
  # Only the latest agent's image is kept beside its base.
  find "$cache/images" -maxdepth 1 -name 'agent-*.tar' ! -name "agent-$hash-$sum.tar" -delete 2>/dev/null || true
  mkdir -p "$cache/images"
  pack_agent "$rootfs" "$cache/images/base-$hash.tar.gz" "$agent_ref" "$agent_tar"
}

pause_image() {
  local tree=$tools/pause-root
  mkdir -p "$tree"
  install -m 0755 "$tools/pause" "$tree/pause"
  pack "$tree" "$pause_ref" "$tools/pause.tar" /pause
}

write_containerd_config() {
  mkdir -p "$dir/containerd" "$dir/cni/bin" "$dir/cni/conf"
  cat >"$dir/containerd/config.toml" <<EOF
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"

[grpc]
  address = "$sock"

[ttrpc]
  address = "$sock.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "$dir/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_ref"
  # containerd gives a pod's sandbox an oom_score_adj of -998; lowering it
  # takes CAP_SYS_RESOURCE, which some hosts (sandboxed VMs) withhold even
  # from root, and runc then fails to start the sandbox. Here it is never
  # lower than containerd's own.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "$dir/runc"
        SystemdCgroup = false
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc]
      runtime_type = "io.containerd.runsc.v1"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc.options]
        TypeUrl = "io.containerd.runsc.v1.options"
        ConfigPath = "$dir/containerd/runsc.toml"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$cni_bin"
    conf_dir = "$dir/cni/conf"
EOF
  # The shim runs this runsc, its state in the fixture's directory.
  cat >"$dir/containerd/runsc.toml" <<EOF
binary_name = "$gvisor_bin/runsc"
root = "$dir/runsc"
EOF
  # host-local keeps its leases in the fixture's directory, not in
  # /var/lib/cni/networks.
  cat >"$dir/cni/conf/10-vfleet-k8s.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "vfleet-k8s",
  "plugins": [
    {"type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": false,
     "ipam": {"type": "host-local", "dataDir": "$dir/cni/ipam", "ranges": [[{"subnet": "$pod_cidr", "gateway": "$pod_gateway"}]]}},
    {"type": "loopback"}
  ]
}
EOF
}

write_kubelet_config() {
  mkdir -p "$dir/kubelet" "$dir/manifests" "$dir/pod-logs" "$dir/agent"
  cat >"$dir/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
readOnlyPort: 10255
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $dir/pki/ca.crt}
authorization:
  mode: AlwaysAllow
healthzBindAddress: 127.0.0.1
healthzPort: 10248
cgroupDriver: cgroupfs
failSwapOn: false
staticPodPath: $dir/manifests
podLogsDir: $dir/pod-logs
containerRuntimeEndpoint: unix://$sock
volumePluginDir: $dir/kubelet/volume-plugins
# No KUBE-* iptables chains: a pod on the host's network needs none, and
# its KUBE-FIREWALL would drop the host's other traffic to loopback from
# non-loopback sources while the fixture runs.
makeIPTablesUtilChains: false
EOF
  cat >"$dir/manifests/$pod.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $pod
spec:
  hostNetwork: true
  containers:
  - name: agent
    image: $agent_ref
    imagePullPolicy: Never
    args: ["--listen", "/run/vfleet/agent.sock", "--workdir", "/var/tmp/vfleet"]
    volumeMounts:
    - {name: socket, mountPath: /run/vfleet}
    - {name: scratch, mountPath: /var/tmp/vfleet}
  volumes:
  - name: socket
    hostPath: {path: $dir/agent, type: Directory}
  - name: scratch
    emptyDir: {}
EOF
}

# make_pki makes the fixture's credentials: a CA whose client certificates
# the kubelet takes, the API server's certificate to call the kubelet with
# (exec, logs), the service accounts' signing key, and bearer tokens of an
# admin and of the kubelet, both in system:masters: who may do what is not
# what this fixture is about.
make_pki() {
  local k=$dir/pki who token
  [ -f "$k/tokens.csv" ] && return
  mkdir -p "$k"
  (
    umask 077
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$k/ca.key" -out "$k/ca.crt" -days 30 -subj /CN=vfleet-k8s-ca 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout "$k/client.key" -out "$k/client.csr" \
      -subj /O=system:masters/CN=kube-apiserver-kubelet-client 2>/dev/null
    openssl x509 -req -in "$k/client.csr" -CA "$k/ca.crt" -CAkey "$k/ca.key" -CAcreateserial -out "$k/client.crt" -days 30 2>/dev/null
    openssl genrsa -out "$k/sa.key" 2048 2>/dev/null
    for who in admin kubelet; do
      token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
      echo "$token,$who,$who,system:masters" >>"$k/tokens.tmp"
      # The API server's serving certificate is self-signed, made at its
      # start, and it listens on loopback only.
      cat >"$dir/$who.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: vfleet-k8s, cluster: {server: "$api", insecure-skip-tls-verify: true}}]
users: [{name: $who, user: {token: $token}}]
contexts: [{name: vfleet-k8s, context: {cluster: vfleet-k8s, user: $who}}]
current-context: vfleet-k8s
EOF
    done
    mv "$k/tokens.tmp" "$k/tokens.csv"
  )
}

admin_token() { sed -n 's/^\([^,]*\),admin,.*/\1/p' "$dir/pki/tokens.csv"; }

# waiting runs a wait; when it fails, says what the program it waited on
# last logged, and fails: waiting NAME ARGV...
waiting() {
  local name=$1
  shift
  "$@" && return
  log "$name's log ends:"
  tail -n 20 "$dir/$name.log" >&2 || true
  die "waited in vain for $name"
}

# launch starts one of the fixture's programs unless it runs: launch NAME ARGV...
launch() {
  local name=$1
  shift
  alive "$dir/$name.pid" && return
  "$@" >"$dir/$name.log" 2>&1 &
  echo $! >"$dir/$name.pid"
}

# remember records, once per fixture, what stop must put back.
remember() {
  mkdir -p "$dir/saved"
  [ -f "$dir/saved/sysctl" ] || sysctl $sysctls >"$dir/saved/sysctl"
  local p
  if ! [ -f "$dir/saved/outside" ]; then
    for p in $outside; do [ -e "$p" ] || echo "$p"; done >"$dir/saved/outside"
  fi
}

start() {
  if alive "$dir/kubelet.pid" && alive "$dir/kube-apiserver.pid" && alive "$dir/etcd.pid" && alive "$dir/containerd.pid"; then
    log "already running"
    status
    return
  fi
  local p
  for p in containerd ctr containerd-shim-runc-v2 etcd openssl; do
    command -v "$p" >/dev/null || die "$p is not installed (Debian: apt-get install containerd etcd-server openssl)"
  done
  [ -x "$cni_bin/bridge" ] || die "$cni_bin/bridge is not installed (Debian: apt-get install containernetworking-plugins)"
  if ip link show "$bridge" >/dev/null 2>&1 && ! [ -e "$dir/saved" ]; then
    die "the bridge $bridge is there already: another fixture's? stop it first"
  fi
  if ! [ -e "$dir/saved" ] && { ls -d /sys/fs/cgroup/*/kubepods >/dev/null 2>&1 || iptables-save | grep -q ':KUBE-'; }; then
    die "another Kubernetes node runs here (kubepods cgroups or KUBE-* iptables chains): stop it first"
  fi
  local t0=$SECONDS
  build
  remember
  make_pki
  write_containerd_config
  # The pods' bridge, made now rather than by the first pod's network: a
  # test that looks at what its pods left finds it there before them.
  if ! ip link show "$bridge" >/dev/null 2>&1; then
    ip link add "$bridge" type bridge
    ip addr add "$pod_gateway/${pod_cidr#*/}" dev "$bridge"
    ip link set "$bridge" up
  fi
  # containerd finds a runtime's shim on its PATH.
  launch containerd env PATH="$gvisor_bin:$PATH" containerd --config "$dir/containerd/config.toml"
  local i
  for i in $(seq 60); do
    ctr --address "$sock" version >/dev/null 2>&1 && break
    alive "$dir/containerd.pid" || die "containerd exited: see $dir/containerd.log"
    sleep 0.5
  done
  ctr --address "$sock" -n k8s.io images import "$tools/pause.tar" >/dev/null
  ctr --address "$sock" -n k8s.io images import "$agent_tar" >/dev/null
  launch etcd etcd --data-dir "$dir/etcd" --listen-client-urls "$etcd_client" --advertise-client-urls "$etcd_client" \
    --listen-peer-urls "$etcd_peer" --initial-advertise-peer-urls "$etcd_peer" --initial-cluster "default=$etcd_peer"
  # The service range is only allocated from (no proxy runs): it is one
  # of the ranges set aside for tests. Privileged pods are allowed, as
  # clusters that run node exporters allow them: a node's bare baseline
  # is one.
  launch kube-apiserver "$bindir/kube-apiserver" --etcd-servers "$etcd_client" --bind-address 127.0.0.1 \
    --allow-privileged=true \
    --secure-port "${api##*:}" --cert-dir "$dir/apiserver" --token-auth-file "$dir/pki/tokens.csv" \
    --authorization-mode Node,RBAC --service-cluster-ip-range 198.19.0.0/24 \
    --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$dir/pki/sa.key" \
    --service-account-signing-key-file "$dir/pki/sa.key" \
    --kubelet-client-certificate "$dir/pki/client.crt" --kubelet-client-key "$dir/pki/client.key" \
    --kubelet-preferred-address-types Hostname
  # Only the controllers a run's namespace and pods need: the node's
  # lifecycle (a kubelet registers its node tainted not-ready, and only
  # this controller lifts the taint once the node is ready), namespaces,
  # their service accounts, garbage collection; nothing of workloads'
  # controllers. It serves nothing (port 0).
  launch kube-controller-manager "$bindir/kube-controller-manager" --kubeconfig "$dir/admin.kubeconfig" \
    --controllers nodelifecycle,namespace,serviceaccount,garbagecollector --leader-elect=false --secure-port 0 \
    --use-service-account-credentials=false
  launch kube-scheduler "$bindir/kube-scheduler" --kubeconfig "$dir/admin.kubeconfig" --leader-elect=false --secure-port 0
  write_kubelet_config
  # The node's address is the pods' bridge's, in the range set aside for
  # tests, not the host's own on its NIC: what a host-network pod reports
  # as its address, and what other pods are sent to reach it.
  launch kubelet "$bindir/kubelet" --config "$dir/kubelet/config.yaml" --root-dir "$dir/kubelet/root" \
    --cert-dir "$dir/kubelet/pki" --hostname-override "$node" --kubeconfig "$dir/kubelet.kubeconfig" \
    --node-ip "$pod_gateway"
  # Generous waits: on a loaded machine (the tests' TCG guests beside
  # it) the API server and the kubelet take minutes to come up.
  waiting kubelet "$tools/fixture" pod "$status_url" "$pod-$node" 180s
  waiting kubelet env FIXTURE_TOKEN="$(admin_token)" "$tools/fixture" pod "$api/api/v1/namespaces/default/pods" "$pod-$node" 180s
  waiting kubelet "$tools/fixture" hello "$dir/agent/agent.sock" 30s
  waiting kube-controller-manager env FIXTURE_TOKEN="$(admin_token)" "$tools/fixture" node "$api/api/v1/nodes/$node" 120s
  # The node's runtime as a RuntimeClass of its own, as a cluster offers
  # each isolation technology it has.
  local rc
  for rc in runc:runc gvisor:runsc; do
    FIXTURE_TOKEN=$(admin_token) "$tools/fixture" post "$api/apis/node.k8s.io/v1/runtimeclasses" \
      '{"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "'"${rc%%:*}"'"}, "handler": "'"${rc#*:}"'"}'
  done
  echo "$agent_ref" >"$dir/agent-image"
  log "up in $((SECONDS - t0))s; kubectl --kubeconfig $dir/admin.kubeconfig"
}

status() {
  if ! alive "$dir/kubelet.pid"; then
    echo "not running"
    return
  fi
  FIXTURE_TOKEN=$(admin_token) "$tools/fixture" pod "$api/api/v1/namespaces/default/pods" "$pod-$node" 1s || true
}

# stop_pid stops a process this fixture started, waiting for it to go.
stop_pid() {
  local f=$1 pid i
  alive "$f" || { rm -f "$f"; return; }
  pid=$(cat "$f")
  kill "$pid"
  for i in $(seq 30); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$f"
}

# shims are the containerd shims serving this fixture's containerd, and
# the gVisor sandboxes of its runsc.
shims() {
  local p
  for p in /proc/[0-9]*; do
    tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -q -e "^[^ ]*containerd-shim-run[a-z0-9.-]* .*-address $sock " -e "--root=$dir/runsc" && echo "${p#/proc/}"
  done
  return 0
}

# rm_cgroup removes a cgroup tree depth first, in every hierarchy.
rm_cgroup() {
  local h
  for h in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
    if [ -d "$h$1" ]; then find "$h$1" -depth -type d -exec rmdir {} + 2>/dev/null || true; fi
  done
  return 0
}

stop() {
  stop_pid "$dir/kubelet.pid"
  stop_pid "$dir/kube-scheduler.pid"
  stop_pid "$dir/kube-controller-manager.pid"
  stop_pid "$dir/kube-apiserver.pid"
  stop_pid "$dir/etcd.pid"
  if alive "$dir/containerd.pid"; then
    local id
    # The pod's containers, then their sandboxes: what the kubelet would
    # have stopped had it been told to drain.
    for id in $(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr --address "$sock" -n k8s.io tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
    done
    for id in $(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr --address "$sock" -n k8s.io tasks delete -f "$id" >/dev/null 2>&1 || true
    done
    for id in $(ctr --address "$sock" -n k8s.io containers ls -q 2>/dev/null); do
      ctr --address "$sock" -n k8s.io containers delete "$id" >/dev/null 2>&1 || true
    done
  fi
  stop_pid "$dir/containerd.pid"
  local pid p
  for pid in $(shims); do kill -9 "$pid" 2>/dev/null || true; done
  if [ -d "$dir" ]; then
    findmnt -rn -o TARGET | { grep "^$dir/" || true; } | sort -r | while read -r m; do umount -l "$m" || true; done
  fi
  rm_cgroup kubepods
  # The pods' network namespaces go with their sandboxes; the bridge
  # stays unless taken away.
  ip link del "$bridge" 2>/dev/null || true
  if [ -f "$dir/saved/sysctl" ]; then
    sed 's/ = /=/' "$dir/saved/sysctl" | while read -r kv; do sysctl -qw "$kv"; done
  fi
  if [ -d /var/log/containers ]; then
    find /var/log/containers -maxdepth 1 -type l -lname "$dir/*" -delete
  fi
  if [ -f "$dir/saved/outside" ]; then
    while read -r p; do rm -rf "$p"; done <"$dir/saved/outside"
  fi
  rm -rf "$dir"
  return 0
}

# build builds (or finds cached) everything start needs; one build at a
# time (the tests' fixtures are built beside the tests that start it).
build() {
  mkdir -p "$cache"
  exec 9>"$cache/build.lock"
  flock 9
  build_kube
  build_gvisor
  build_tools
  pause_image
  agent_image
  # Not inherited by the programs start runs, which would hold it.
  exec 9>&-
}

[ $# -eq 1 ] || usage
case "$1" in
  build|start|stop) [ "$(id -u)" -eq 0 ] || die "$1 needs root"; "$1" ;;
  status) status ;;
  *) usage ;;
esac
