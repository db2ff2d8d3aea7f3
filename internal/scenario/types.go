package scenario

import (
	"time"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
)

// Spec is a parsed and validated scenario file. It is plain data.
type Spec struct {
	Name        string
	Description string
	// Source is where the scenario came from (a path, or "builtin:NAME"),
	// used in error messages and stored with the run.
	Source string
	// Text is the scenario file's exact bytes; stored with the run and hashed.
	Text        []byte
	Repetitions int
	Warmup      int // discarded executions per guest and workload before the measured ones
	Duration    time.Duration
	Baseline    string // name of the guest group every value is normalised to
	Guests      []GuestGroup
	Workloads   []WorkloadEntry
	// Network is the `network:` section; nil when the run needs no peer.
	Network *Network
	// Adaptive, when set, adds repetitions beyond Repetitions until the
	// results are precise enough; nil runs exactly Repetitions.
	Adaptive *Adaptive
	// Fleet is the `fleet:` section; nil runs each step in one guest at a
	// time with every guest started once.
	Fleet *Fleet
	// Noise is the `noise:` section; nil for no aggressors.
	Noise *Noise
	// HostSettings is the `host_settings:` section; nil leaves the host's
	// kernel settings as they are.
	HostSettings *HostSettings
	// Dropped are the optional groups this host refused, taken out of
	// Guests before the run (DropRefused); stored with the run.
	Dropped []store.DroppedGroup
}

// HostSettings are host-wide real-time settings a run holds while it
// lasts; the host's own come back afterwards, after a crash through
// `vfleet clean`.
type HostSettings struct {
	// RTRuntimeUS is written to sched_rt_runtime_us when set: -1 turns RT
	// throttling off, so a real-time task may take all of a CPU.
	RTRuntimeUS *int
	// IRQAffinity, when set, is the CPU list every interrupt that can be
	// moved is moved to, to keep the measured CPUs quiet.
	IRQAffinity string
}

// MaxRTRuntimeUS is the largest RT runtime a scenario may ask for, the
// kernel's default period; the kernel refuses one above the host's period.
const MaxRTRuntimeUS = 1_000_000

// Adaptive is the `adaptive:` section: repeat each workload until the 95%
// confidence interval of its headline metric (the first one the workload
// reports) is narrower than Target in every guest group, or MaxRepetitions
// are done.
type Adaptive struct {
	// Target is the largest acceptable half-width of the interval relative
	// to the mean: 0.05 for ±5%.
	Target         float64
	MaxRepetitions int
}

// DefaultMaxRepetitions bounds an adaptive run whose scenario names no
// maximum.
const DefaultMaxRepetitions = 20

// Network is the `network:` section: the peer the run measures against
// and where network clients and servers run.
type Network struct {
	// Path is the data path of guests whose group names none.
	Path string
	// ClientCPU and ServerCPU pin the measuring client (in the guest) and
	// server (on the peer) to a host CPU; NoPin leaves them to the
	// scheduler. On a VM, cross-CPU wake-ups dominate round trips, so the
	// placement is stored with every sample.
	ClientCPU, ServerCPU int
	// Passthrough are the PCI addresses of the host's devices lent to the
	// VMs on the passthrough path, one each in the order the VMs are
	// planned.
	Passthrough []string
	// Uplink is a NIC of the host dedicated to testing, which the run's
	// one guest path sits on instead of its uplink veth; "" for none.
	Uplink string
	// Peer is the machine at the uplink's far end, ssh://USER@HOST[:PORT]
	// in its canonical form, which runs the peer's side over SSH; "" for
	// the local peer. It comes with Uplink, and the other way round.
	Peer string
	// PeerIdentity and PeerKnownHosts are absolute paths to the key file
	// and the known_hosts file for the peer; "" for the SSH agent's keys
	// and ~/.ssh/known_hosts.
	PeerIdentity, PeerKnownHosts string
	// PeerNIC is the peer's interface on the test wire.
	PeerNIC string
}

// NoPin is the CPU of an unpinned network client or server.
const NoPin = -1

// GuestGroup is one `guests:` entry; Count guests are made from it.
type GuestGroup struct {
	// Spec is what each of the group's guests is, its name aside: the
	// fields every group has, and those its kind takes (guest.Field),
	// read once into it.
	guest.Spec
	// Name is the group's; its guests' names derive from it (guestName).
	Name  string
	Count int
	// Network is the data path of the group's guests; empty for the
	// baseline (it uses the host side's direct link).
	Network string
	// Optional groups are dropped from the run, not an error, when the
	// host refuses their kind, runtime or accelerator (see DropRefused).
	Optional bool
	// Spread are the kind's fields the group gives as lists
	// (guest.FieldValue.Spread), by key: its guest i takes value i mod n
	// of each, and Spec holds the first.
	Spread map[string][]string
}

// WorkloadEntry is one `workloads:` entry.
type WorkloadEntry struct {
	ID       string // unique label; defaults to Workload
	Workload string // registry name
	Params   workload.Params
	Duration time.Duration // overrides Spec.Duration when non-zero
}

// Plan is a Spec expanded into the guests to start and the ordered steps to run.
type Plan struct {
	Spec *Spec
	// Guests are every guest any phase runs, the network built for all
	// (for a phase's alone when the phases own their networks).
	Guests []PlannedGuest
	// Phases run in order; a scenario without fleet.scale has one.
	Phases []Phase
	Steps  []Step
	// NoiseGuests run the aggressors and no step.
	NoiseGuests []string
}

// NetworkPerPhase says whether each phase builds its network for its
// guests alone rather than the run one for all: the phases are data
// paths that take a dedicated NIC in turn (PhasePath).
func (p *Plan) NetworkPerPhase() bool {
	return len(p.Phases) > 0 && p.Phases[0].Kind.OwnsNetwork()
}

// Phase is one fleet size of a sweep, or one data path of a run whose
// paths take a dedicated NIC in turn: its guests are started before its
// steps, and those that belong to it alone stopped after them.
type Phase struct {
	Kind PhaseKind
	// FleetSize is a PhaseFleetSize's number of guests in each scaled
	// group; 0 for another kind.
	FleetSize int
	Guests    []string
	// Scaled are the phase's guests that belong to it alone.
	Scaled []string
	// Path is a PhasePath's one data path on network.uplink; "" for
	// another kind.
	Path string
}

// PhaseKind is what a plan's phases are: what tells each from the others.
// What the runner does with a phase of a kind, it asks the kind.
type PhaseKind int

const (
	// PhaseWhole is the one phase of a plan that neither sweeps fleet
	// sizes nor takes a NIC path by path: every guest, one network.
	PhaseWhole PhaseKind = iota
	// PhaseFleetSize is one size of fleet.scale: the scaled groups'
	// guests, launched afresh, beside the fixed ones.
	PhaseFleetSize
	// PhasePath is one data path on network.uplink: the NIC is under it
	// alone while the phase runs.
	PhasePath
)

// OwnsNetwork says whether a phase of the kind has a network of its own:
// built for its guests as it begins and taken down after they stop, so
// that the next phase's path gets the NIC.
func (k PhaseKind) OwnsNetwork() bool { return k == PhasePath }

// AuditEach says whether an audit (which measures nothing) starts every
// phase of the kind, not the first alone: each path has guests of its
// own on a network of its own, while a sweep's first size stands for the
// fleet.
func (k PhaseKind) AuditEach() bool { return k == PhasePath }

// PlannedGuest is one guest to start, with the group it came from.
type PlannedGuest struct {
	Group string
	Spec  guest.Spec
	// Network is the guest's data path, empty when the run has no network
	// or the guest is a baseline on the direct link.
	Network string
}

// Step is one execution of one workload in one guest.
type Step struct {
	Guest      string // PlannedGuest.Spec.Name
	Group      string
	WorkloadID string
	Workload   string
	Params     workload.Params // fully resolved: defaults merged with the entry's
	Duration   time.Duration
	Repetition int  // 0-based among measured steps; warm-ups count separately
	Warmup     bool // the result is discarded
	// Together, when set, lists the guests that start the step at one
	// moment; Guest and Group are then empty.
	Together []string
	Phase    int
	// Noise is the aggressor profile running meanwhile; "" or NoiseNone
	// for none.
	Noise string
	// Labels are stored with the step's samples beside its parameters
	// (fleet size, mode, noise profile) where the scenario varies them.
	Labels map[string]string
}
