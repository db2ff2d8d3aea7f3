// Package guest defines the one interface every isolation kind implements
// (bare host, OCI container, and later VMs) and the registry the scenario
// names kinds from.
//
// Lifecycle: a Spec is plain data validated with the scenario. New turns it
// into a live Guest without touching the system; Start creates every
// resource, recording each in the cleanup ledger before creating it, and
// undoes its own partial work when it fails; Stop removes everything and is
// idempotent, bounded in time, and works on a cancelled context.
package guest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/ledger"
)

// Paths every guest kind uses inside the guest, so workloads and the
// agent find the same places whatever the isolation.
const (
	// ScratchDir is where file-I/O workloads write: inside the guest's own
	// copy-on-write layer, on the host's disk.
	ScratchDir = "/var/tmp/vfleet"
	// AgentSocketDir holds the agent's unix socket.
	AgentSocketDir = "/run/vfleet"
	// AgentSocket is the agent's socket path inside the guest.
	AgentSocket = AgentSocketDir + "/agent.sock"
	// ReadyTimeout bounds the wait for a started guest's agent.
	ReadyTimeout = 30 * time.Second
)

// Arches are the architectures vfleet runs VM guests of, as Debian (and
// Go) name them.
var Arches = []string{"amd64", "arm64"}

// Kernel flavours of vfleet's VM images, as Debian names them: the cloud
// kernel, small and quick to boot, and the PREEMPT_RT kernel, the
// real-time guest of the RT study, which is also the one with the
// timerlat and osnoise tracers.
const (
	KernelCloud = "cloud"
	KernelRT    = "rt"
)

// KernelFlavours are the flavours a VM may ask for; the first is the
// default.
var KernelFlavours = []string{KernelCloud, KernelRT}

// Spec describes one guest, as the scenario declares it.
type Spec struct {
	Name string // unique within a run, e.g. "container-0"
	Kind string // registry key: "host", "container", "vm"
	// Runtime selects the implementation within a kind, e.g. "runc" or
	// "crun" for containers. Empty means the kind's default.
	Runtime string
	// CPUs is a cpuset list ("0-1", "1"), empty for no restriction.
	CPUs string
	// MemoryBytes limits the guest's memory, 0 for no limit.
	MemoryBytes int64
	// CPULimit caps the guest's CPU time in CPUs' worth (0.9 = 90% of one
	// CPU), 0 for no cap. It is how a known slowdown is injected.
	CPULimit float64
	// NetNS is the path of a network namespace the guest joins, prepared
	// with its interface by the run's network; empty means the kind's
	// default (the host's network for the baseline, a namespace with only
	// loopback for a container).
	NetNS string
	// Tap is a VM's network interface, prepared by the run's network; nil
	// for no network. VM-only: a VM cannot join a namespace, so its NIC is
	// a tap device where namespace guests have their veth.
	Tap *TapConfig
	// Image is the user's image the guest runs, as the scenario names it
	// (an absolute path, or for a VM run by libvirt a domain there:
	// LibvirtImagePrefix and its name); empty for vfleet's own. The run
	// resolves it into Env.RootFS; a kind that cannot run it refuses it in
	// New.
	Image string
	// Security is the profile the guest runs under (SecurityDefault, …);
	// empty for its kind's default. See SecurityOf.
	Security string

	// The fields below are kinds' own (see Field): each kind declares
	// those it takes, and refuses the others (CheckSpec). For a VM, Runtime
	// names the machine ("q35", "microvm") and MemoryBytes is the guest's
	// RAM rather than a limit. The members are those that the run, the
	// session or the report read beside their kind; a kind's field that
	// only the kind reads is held in Own, not in a new member.

	// Arch is the guest's architecture as Debian names it ("amd64",
	// "arm64"); empty for the host's. Another one is emulated.
	Arch string
	// KernelFlavour is which of vfleet's guest kernels the VM boots
	// (KernelFlavours); empty for the default. A user's disk boots its own.
	KernelFlavour string
	// VCPUs is the number of virtual CPUs, 0 for one.
	VCPUs int
	// Accel is "auto" (or empty), "kvm" or "tcg".
	Accel string
	// Launch is "boot" (or empty): a cold boot of the kernel; or "clone":
	// a restore of a template VM of the same shape, booted once and saved.
	Launch string
	// MemoryMerge offers the guest's RAM to the host's same-page merging
	// (KSM), which the run switches on while it lasts.
	MemoryMerge bool
	// PinVCPUs pins vCPU i to the i-th host CPU of this cpuset list; empty
	// leaves the vCPU threads to the host scheduler.
	PinVCPUs string
	// RTPriority, when above 0, runs a VM's vCPU threads under SCHED_FIFO
	// at this priority (1-99), or lets a container's processes use
	// real-time scheduling up to it.
	RTPriority int
	// Boot is how a VM boots the user's disk named by Image; zero for
	// vfleet's own image.
	Boot KernelBoot
	// Firmware, FirmwareUEFI, boots the user's disk through UEFI firmware
	// and the disk's own boot loader instead of Boot's kernel.
	Firmware string
	// Libvirt is the libvirt URI that defines and starts a VM as a
	// transient domain; empty for QEMU started by vfleet itself.
	Libvirt string
	// Own holds the values of the kind's fields that no member above
	// holds, by key (OwnTextField, …): nil when none is given.
	Own Own `json:",omitempty"`
}

// LibvirtImagePrefix starts a Spec.Image that names a domain at the
// group's libvirt (image: libvirt:DOMAIN) rather than a file.
const LibvirtImagePrefix = "libvirt:"

// LibvirtDomain is the libvirt domain the spec's image names, and whether
// it names one.
func (s Spec) LibvirtDomain() (string, bool) {
	return strings.CutPrefix(s.Image, LibvirtImagePrefix)
}

// FirmwareUEFI is Spec.Firmware for a disk that boots through UEFI.
const FirmwareUEFI = "uefi"

// KernelBoot boots a user's VM disk directly with a kernel the user
// names, as QEMU's -kernel, -initrd and -append do.
type KernelBoot struct {
	Kernel string // host path of the kernel image
	Initrd string // host path of the kernel's initrd, empty for none
	// Cmdline is the user's kernel command line; vfleet adds its own
	// parameters to it.
	Cmdline string
}

// IsZero says no kernel boot was asked for.
func (b KernelBoot) IsZero() bool { return b == KernelBoot{} }

// TapConfig is a VM's network interface: a device on the host (a
// persistent tap, or a macvtap) and the addressing the guest gives its NIC.
type TapConfig struct {
	// NSPath is the network namespace holding the device; it must be
	// opened from inside it.
	NSPath string
	// Name is the device's name in that namespace; on the user path, the
	// path of its passt's unix socket there.
	Name string
	// Addr is the guest's address with its prefix length.
	Addr netip.Prefix
	// Gateway is the guest's default route, invalid on switched paths
	// (the peer is on the guest's own segment).
	Gateway netip.Addr
	// MAC is the guest NIC's hardware address.
	MAC string
	// OffloadsOff, when set, is why the NIC must send complete,
	// unsegmented frames (an XDP program on the tap takes no others): its
	// checksum and segmentation offloads are turned off.
	OffloadsOff string
	// Root says the device is a tap in this host's own namespace (NSPath
	// empty), as a guest that TapsInRoot asks: its emulator opens it there
	// by name, and Env.WireTap then puts it on its path.
	Root bool
}

// Env is what the host provides to every guest of a run.
type Env struct {
	RunID string
	// RootFS is the guest image's root filesystem (read-only to guests: each
	// guest writes into its own copy-on-write layer).
	RootFS string
	// AgentPath is the agent binary's path inside RootFS.
	AgentPath string
	// AgentBinary, when set, is the static agent on the host, which the
	// image lacks (a user's image): the kind brings it in read-only at
	// AgentPath, leaving the image itself unchanged.
	AgentBinary string
	// ImageEnv is the image's own environment (a user's OCI image config),
	// which the guest's processes get over vfleet's defaults.
	ImageEnv []string
	// StateDir is a directory owned by the run where guests keep sockets,
	// overlay layers, bundles and logs.
	StateDir string
	// Ledger records the guest's resources before they exist, in the
	// guest's own scope (Ledger.Scoped): a clean undoes guests side by
	// side, so a guest records here nothing another guest needs.
	Ledger *ledger.Ledger
	// Detached guests outlive the vfleet process that started them (a
	// long-lived fleet): kinds whose guests are vfleet's children must not
	// tie their lives to it. Their ledger still records every resource.
	Detached bool
	// WireTap puts a guest's tap that its TapConfig.Root says is in this
	// host's own namespace onto its path, once the guest's emulator holds
	// it; nil without a network.
	WireTap func(guestName string) error
	// Progress, when set, is told what a start is doing that takes long
	// and is done once for many guests (a VM's base disk and template, the
	// KVM probe), so that nobody waits in silence.
	Progress func(line string)
}

// Say tells Progress a line, if there is one to tell.
func (e Env) Say(line string) {
	if e.Progress != nil {
		e.Progress(line)
	}
}

// Info describes a running guest; it is stored with the run.
type Info struct {
	Kind     string        `json:"kind"`
	Runtime  string        `json:"runtime,omitempty"`
	BootTime time.Duration `json:"boot_ns"` // Start call to agent ready
	// Phases are the phases of the guest's start that its kind tells
	// apart, in the order they pass (a pod's conditions, as Kubernetes
	// names them: PodScheduled, Initialized, ContainersReady, Ready);
	// none for a kind that tells only BootTime.
	Phases     []Phase `json:"phases,omitempty"`
	PIDs       []int   `json:"pids,omitempty"`
	Cgroup     string  `json:"cgroup,omitempty"`
	ScratchDir string  `json:"scratch_dir,omitempty"` // where file I/O workloads write, as the guest sees it
	// AgentAddr is the host-side unix socket of the guest's agent, where
	// more clients may connect to run work concurrently (a server and its
	// background load); empty when the kind's channel carries one client.
	AgentAddr string            `json:"-"`
	Details   map[string]string `json:"details,omitempty"`
	// Addr is a NetOwn guest's address on its own network, where its
	// kind's peer (NetPeered) reaches it; invalid for other guests.
	Addr netip.Addr `json:"-"`
}

// Phase is one phase of a guest's start, and when it was reached.
type Phase struct {
	Name string `json:"name"`
	// After is the time from the start's request to the phase.
	After time.Duration `json:"after_ns"`
}

// Guest is one live isolated environment with an agent inside.
type Guest interface {
	Spec() Spec
	// Start creates the guest and returns once its agent answers.
	Start(ctx context.Context) error
	// Exec runs one request through the guest's agent.
	Exec(ctx context.Context, req agent.Request) (agent.Reply, error)
	// Info is valid after Start.
	Info() Info
	// Stop tears the guest down. It is idempotent.
	Stop(ctx context.Context) error
}

// Kind creates guests of one isolation kind.
type Kind interface {
	Name() string
	// Probe reports whether this host can run guests of the kind with the
	// given runtime; the error wraps ErrNotSupported and names what is
	// missing.
	Probe(ctx context.Context, runtime string) error
	// New returns a guest that has not been started.
	New(spec Spec, env Env) (Guest, error)
}

// Traits are what a kind's guests can do that the rest of vfleet plans
// around; the zero Traits are a guest whose processes run on the host in
// their own namespaces (the bare host, a container).
type Traits struct {
	// Network is how a guest joins a run's network.
	Network NetAttachment
	// PinsVCPUs: the guest is placed on CPUs by pinning its virtual CPUs
	// (Spec.PinVCPUs), not by a CPU set its processes run in (Spec.CPUs).
	PinsVCPUs bool
	// AgentInGuest: the agent runs in the guest's own memory, not as a host
	// process whose memory counts as vfleet's.
	AgentInGuest bool
	// OwnKernel: the guest boots a kernel of its own (a VM), which counts
	// the time its processes use of its CPUs; what the host sees is its
	// emulator's threads, so a step reads the guest's use inside it.
	OwnKernel bool
	// BootsDisk: a user's image (Spec.Image) is a disk the guest boots, a
	// regular file, rather than an OCI image whose root file system its
	// processes run in.
	BootsDisk bool
	// Security are the profiles (Spec.Security) the kind takes, its
	// default first; none means the kind confines nothing
	// (SecurityUnconfined only).
	Security []string
	// Bare: the guest is the host itself, what every other kind is
	// compared against. A scenario's baseline is its first bare group; a
	// bare guest reaches the run's peer over the host side's own direct
	// link (no data path), is placed by a taskset on its tools, and is
	// never what a fleet sweep scales.
	Bare bool
	// RealTimeOnRequest: the guest may use real-time scheduling only when
	// its spec grants it (Spec.RTPriority), so a scenario whose workloads
	// need it grants it to the kind's groups that name no priority.
	RealTimeOnRequest bool
	// Elsewhere: the guest's processes are not this host's that vfleet
	// started (a pod, run by its node): no cgroup of the run holds them
	// and its Info names no PIDs, so what a run reads of this host's
	// processes and cgroups says nothing of it.
	Elsewhere bool
}

// NetAttachment is how a guest joins a run's network.
type NetAttachment int

const (
	// NetNamespace: the guest joins a network namespace whose eth0 is on
	// its data path (Spec.NetNS).
	NetNamespace NetAttachment = iota
	// NetTap: the guest's NIC is a tap in the host side (Spec.Tap), which
	// not every data path can take.
	NetTap
	// NetOwn: the guest's network is that of the system it runs in (a
	// cluster's pod network), which no data path of a run reaches.
	NetOwn
)

// RootTapper is implemented by a kind some of whose guests' emulators
// open their tap by name in this host's own namespace, not from a
// descriptor vfleet hands them (a VM run by libvirt, whose daemon is
// there): the run makes such a guest's tap there (TapConfig.Root). Its
// error says why a guest cannot be on a run's path at all (one run on
// another host).
type RootTapper interface {
	TapsInRoot(spec Spec) (bool, error)
}

// TapsInRoot says whether the guest of spec opens its tap in this host's
// own namespace, or why it cannot be on a run's path.
func TapsInRoot(spec Spec) (bool, error) {
	regMu.RLock()
	k := kinds[spec.Kind]
	regMu.RUnlock()
	if r, ok := k.(RootTapper); ok {
		return r.TapsInRoot(spec)
	}
	return false, nil
}

// NetPeered is implemented by a NetOwn kind whose network a run's
// network workloads reach through a peer of the kind's own on it (a pod
// on the cluster's pod network): the run starts the peer beside the
// guests, and each guest's Info.Addr is where the peer reaches it.
type NetPeered interface {
	// NetPeer is the spec of the peer for a guest of spec (the caller
	// names it), and a key that is the same for the guests one peer
	// serves (one cluster's).
	NetPeer(spec Spec) (key string, peer Spec)
}

// NetPeerOf is NetPeered.NetPeer for the kind of spec; ok is false for a
// kind that has no peer of its own.
func NetPeerOf(spec Spec) (key string, peer Spec, ok bool) {
	regMu.RLock()
	k := kinds[spec.Kind]
	regMu.RUnlock()
	if p, is := k.(NetPeered); is {
		key, peer = p.NetPeer(spec)
		return key, peer, true
	}
	return "", Spec{}, false
}

// WithTraits is implemented by kinds whose Traits are not the zero ones.
type WithTraits interface {
	Traits() Traits
}

// Conformable is implemented by a kind whose guests in the conformance
// suite every kind passes (guesttest) start from more than the kind's
// defaults, the zero Spec: ConformanceSpec is the least spec that checks
// what the kind's runs use (a container's limits), on any host its Probe
// accepts. The suite adds the name, and what each of its checks needs (a
// network, a pin, a profile).
type Conformable interface {
	ConformanceSpec() Spec
}

// WithProgram is implemented by kinds whose guests run a program of the
// host's whose release changes what they measure (an OCI runtime, QEMU):
// a run records its version beside the measuring tools'.
type WithProgram interface {
	// Program names the host program (as internal/tools knows it) that
	// runs a guest of this spec.
	Program(spec Spec) string
}

// WithLeftovers is implemented by kinds whose guests leave state of their
// own that a run's teardown must remove, beyond the processes, mounts,
// cgroups, namespaces and links every kind may leave (a runtime's record
// of a container): tests' leak checks ask for it before and after.
type WithLeftovers interface {
	// Leftovers lists what exists now, each entry naming what it is.
	Leftovers() []string
}

// Leftovers lists what every registered kind reports of its own state.
func Leftovers() []string {
	var out []string
	for _, name := range KindNames() {
		regMu.RLock()
		k := kinds[name]
		regMu.RUnlock()
		if l, ok := k.(WithLeftovers); ok {
			out = append(out, l.Leftovers()...)
		}
	}
	return out
}

// ProgramOf names the host program that runs a guest of spec's kind, ""
// for a kind that runs none.
func ProgramOf(spec Spec) string {
	regMu.RLock()
	k := kinds[spec.Kind]
	regMu.RUnlock()
	if p, ok := k.(WithProgram); ok {
		return p.Program(spec)
	}
	return ""
}

// TraitsOf returns the Traits of a guest of spec: its kind's, under the
// spec's runtime (or the kind's default one) for a Runtimed kind. Every
// caller asks of the guest as specified, so that no runtime is planned
// with another's traits. An unknown kind has the zero Traits (its name is
// refused elsewhere).
func TraitsOf(spec Spec) Traits {
	regMu.RLock()
	k := kinds[spec.Kind]
	regMu.RUnlock()
	if r, ok := k.(Runtimed); ok {
		return r.RuntimeTraits(cmp.Or(spec.Runtime, r.Runtimes()[0]))
	}
	if t, ok := k.(WithTraits); ok {
		return t.Traits()
	}
	return Traits{}
}

// ErrNotSupported says the host cannot run a kind or runtime; the wrapping
// error names the reason and the package that would provide it.
var ErrNotSupported = errors.New("not supported on this host")

// ErrNotDetachable is what a kind's New wraps, saying why, for a detached
// guest (Env.Detached) that a later vfleet process could not reach.
var ErrNotDetachable = errors.New("cannot outlive the vfleet process that starts it")

var (
	regMu sync.RWMutex
	kinds = map[string]Kind{}
)

// Register adds a kind; each implementation calls it from init().
func Register(k Kind) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := kinds[k.Name()]; dup {
		panic("guest kind registered twice: " + k.Name())
	}
	kinds[k.Name()] = k
}

// Lookup returns the kind registered under name.
func Lookup(name string) (Kind, error) {
	regMu.RLock()
	defer regMu.RUnlock()
	k, ok := kinds[name]
	if !ok {
		return nil, fmt.Errorf("unknown guest kind %q (known: %v)", name, kindNamesLocked())
	}
	return k, nil
}

// KindNames lists the registered kinds in sorted order.
func KindNames() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	return kindNamesLocked()
}

func kindNamesLocked() []string {
	names := make([]string, 0, len(kinds))
	for n := range kinds {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
