package scenario

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/vfleet/vfleet/internal/guest"
)

// Fleet is the `fleet:` section: how many guests run a step at once, where
// they are pinned, what a failed start does, and the fleet sizes to sweep.
type Fleet struct {
	// Modes lists how each step runs, every mode in turn: ModeAlone (one
	// guest at a time, the others idle) and ModeTogether (every measured
	// guest at the same moment). Empty means alone, unlabelled.
	Modes   []string
	Pinning Pinning
	// AllOrNothing stops the run when any guest fails to start; otherwise
	// the fleet goes on with the guests that did.
	AllOrNothing bool
	// Scale lists fleet sizes: the suite runs once per size with that many
	// guests in every scaled group (each group that is neither a bare host
	// nor the noise group), each size a freshly launched fleet.
	Scale []int
	// GroupsApart launches and measures each scaled group on its own at
	// every size, the others not running: groups compared at a size then
	// do not share the host with each other's fleets.
	GroupsApart bool
	// Idle is how long each freshly launched fleet idles while vfleet
	// measures its own CPU and the guests' footprint: long enough for a
	// periodic wake-up (a timer, a health check) to show.
	Idle time.Duration
}

// DefaultFleetIdle is fleet.idle when the scenario does not say.
const DefaultFleetIdle = 3 * time.Second

// What fleet.groups takes.
const (
	GroupsTogether = "together"
	GroupsApart    = "apart"
)

// How a step runs in a fleet.
const (
	ModeAlone    = "alone"
	ModeTogether = "together"
)

// Pinning strategies.
const (
	PinNone   = "none"
	PinSpread = "spread"
)

// Pinning places guests on host CPUs. The pool is the host's online CPUs
// less the first Reserve (left to the host) and less the noise CPUs.
type Pinning struct {
	// Strategy PinNone confines guests to the pool as a whole (when the
	// pool is smaller than the host); PinSpread gives each guest its own
	// CPUs, one per vCPU, spaced as far apart as the topology allows.
	Strategy string
	Reserve  int
}

// Noise is the `noise:` section: aggressors that run while the measured
// guests run, each step repeated under every profile.
type Noise struct {
	// Profiles are NoiseProfiles names; NoiseNone measures without noise.
	Profiles []string
	// On is NoiseOnHost, or the name of a guest group whose guests run the
	// aggressors and nothing else.
	On string
	// CPUs is the cpuset the aggressors are pinned to, and which measured
	// guests are kept off. Empty: the first half of the host's CPUs.
	CPUs string
}

// NoiseOnHost runs the aggressors on the bare host, in a guest of this
// name that the run adds.
const NoiseOnHost = "host"

// NoiseGuest names the guest that runs host-side aggressors.
const NoiseGuest = "noise"

// NoiseNone is the profile without aggressors.
const NoiseNone = "none"

// NoiseProfiles are the aggressor profiles, documented in docs/fleet.md.
var NoiseProfiles = []string{NoiseNone, "cpu", "memory", "io", "network"}

// fleet reads the `fleet:` section.
func (p *parser) fleet(n *yaml.Node) *Fleet {
	f := &Fleet{Pinning: Pinning{Strategy: PinNone}, Idle: DefaultFleetIdle}
	p.fields(n, "fleet", map[string]func(*yaml.Node, string){
		"concurrency": func(v *yaml.Node, path string) {
			f.Modes = p.words(v, path, []string{ModeAlone, ModeTogether})
		},
		"pinning":        func(v *yaml.Node, path string) { p.pinning(v, path, &f.Pinning) },
		"all_or_nothing": p.boolean(&f.AllOrNothing),
		"scale":          func(v *yaml.Node, path string) { f.Scale = p.sizes(v, path) },
		"idle":           p.duration(&f.Idle),
		"groups": func(v *yaml.Node, path string) {
			var groups string
			p.oneOf(&groups, GroupsTogether, GroupsApart)(v, path)
			f.GroupsApart = groups == GroupsApart
		},
	})
	if len(f.Scale) > 0 && f.Modes == nil {
		// A fleet size matters through what the guests do at once.
		f.Modes = []string{ModeTogether}
	}
	return f
}

// words reads a value or a list of distinct values, each one of allowed.
func (p *parser) words(n *yaml.Node, path string, allowed []string) []string {
	items := []*yaml.Node{deref(n)}
	if deref(n).Kind == yaml.SequenceNode {
		items = p.list(n, path, "values")
	}
	var out []string
	for i, item := range items {
		at := path
		if len(items) > 1 {
			at = fmt.Sprintf("%s[%d]", path, i)
		}
		v, ok := p.scalar(item, at)
		switch {
		case !ok:
		case !contains(allowed, v):
			p.errorf(item, at, "%q is not allowed: want one of %s", v, strings.Join(allowed, ", "))
		case contains(out, v):
			p.errorf(item, at, "%q is listed twice", v)
		default:
			out = append(out, v)
		}
	}
	return out
}

func (p *parser) pinning(n *yaml.Node, path string, pin *Pinning) {
	if deref(n).Kind == yaml.ScalarNode {
		p.oneOf(&pin.Strategy, PinNone, PinSpread)(n, path)
		return
	}
	p.fields(n, path, map[string]func(*yaml.Node, string){
		"strategy": p.oneOf(&pin.Strategy, PinNone, PinSpread),
		"reserve":  p.integer(&pin.Reserve, 0, maxCPU),
	})
}

// sizes reads the scale list: distinct fleet sizes, run smallest first so
// the sweep's curve grows left to right as it is measured.
func (p *parser) sizes(n *yaml.Node, path string) []int {
	var out []int
	seen := map[int]bool{}
	for i, item := range p.list(n, path, "fleet sizes") {
		var size int
		at := fmt.Sprintf("%s[%d]", path, i)
		p.integer(&size, 1, MaxCount)(item, at)
		if size == 0 {
			continue
		}
		if seen[size] {
			p.errorf(item, at, "fleet size %d is listed twice", size)
			continue
		}
		seen[size] = true
		out = append(out, size)
	}
	sort.Ints(out)
	return out
}

// noise reads the `noise:` section.
func (p *parser) noise(n *yaml.Node) *Noise {
	ns := &Noise{On: NoiseOnHost}
	seen := p.fields(n, "noise", map[string]func(*yaml.Node, string){
		"profiles": func(v *yaml.Node, path string) { ns.Profiles = p.words(v, path, NoiseProfiles) },
		"on":       p.name(&ns.On),
		"cpus":     p.cpuSet(&ns.CPUs),
	})
	if seen != nil && seen["profiles"] == nil {
		p.errorf(n, "noise.profiles", "missing (required; some of: %s)", strings.Join(NoiseProfiles, ", "))
	}
	return ns
}

// scaled reports whether the fleet sweep sets the group's count.
func (s *Spec) scaled(g GuestGroup) bool {
	return s.Fleet != nil && len(s.Fleet.Scale) > 0 && !guest.TraitsOf(g.Spec).Bare && !s.noiseGroup(g.Name)
}

// noiseGroup reports whether the group runs the aggressors.
func (s *Spec) noiseGroup(name string) bool {
	return s.Noise != nil && s.Noise.On != NoiseOnHost && s.Noise.On == name
}

// checkFleet validates what the fleet and noise sections say about the
// groups, once every group is known.
func (p *parser) checkFleet(root *yaml.Node, s *Spec) {
	if f := s.Fleet; f != nil && len(f.Scale) > 0 {
		any := false
		for _, g := range s.Guests {
			any = any || s.scaled(g)
		}
		if !any {
			p.errorf(root, "fleet.scale", "no guest group to scale: the sweep sets the count of every group that is neither the bare host (kind %s) nor the noise group", BaselineKind)
		}
	}
	if f := s.Fleet; f != nil && f.GroupsApart && len(f.Scale) == 0 {
		p.errorf(root, "fleet.groups", "apart launches each scaled group on its own at every fleet size: it needs fleet.scale")
	}
	if s.Adaptive != nil && (len(s.labelKeys()) > 0) {
		p.errorf(root, "adaptive", "adaptive repetitions compare like with like; they cannot be combined with fleet.scale, several fleet.concurrency modes or noise profiles")
	}
	if s.Noise == nil {
		return
	}
	if s.Noise.On == NoiseOnHost {
		for _, g := range s.Guests {
			if g.Name == NoiseGuest {
				p.errorf(root, "noise.on", "noise on the host runs in a guest named %q, which a guest group already uses; rename the group", NoiseGuest)
			}
		}
		return
	}
	var names []string
	for _, g := range s.Guests {
		names = append(names, g.Name)
		if g.Name != s.Noise.On {
			continue
		}
		if g.Name == s.Baseline {
			p.errorf(root, "noise.on", "group %q is the baseline; the aggressors need a group of their own", g.Name)
		}
		return
	}
	p.errorf(root, "noise.on", "%q is neither host nor a guest group (groups: %s)", s.Noise.On, strings.Join(names, ", "))
}

// Sample labels a fleet adds to the parameters stored with each sample.
const (
	LabelFleetSize = "fleet_size"
	LabelMode      = "mode"
	LabelNoise     = "noise"
)

// labelKeys lists the labels this scenario's samples carry: only those
// that vary, so a plain scenario's samples stay comparable with older runs.
func (s *Spec) labelKeys() []string {
	var keys []string
	if s.Fleet != nil && len(s.Fleet.Scale) > 0 {
		keys = append(keys, LabelFleetSize)
	}
	if s.Fleet != nil && len(s.Fleet.Modes) > 1 {
		keys = append(keys, LabelMode)
	}
	if s.Noise != nil && len(s.Noise.Profiles) > 1 {
		keys = append(keys, LabelNoise)
	}
	return keys
}

// ErrNotScalable is matched by the error of a scenario a capacity search
// cannot grow.
var ErrNotScalable = errors.New("scenario cannot be scaled by one group")

// ScaledGroup returns the one group whose count fleet.scale sets, which a
// capacity search grows. A search decides each size on one case, so the
// scenario must have one scaled group, one concurrency mode and one noise
// profile.
func (s *Spec) ScaledGroup() (GuestGroup, error) {
	fail := func(path, format string, args ...any) (GuestGroup, error) {
		return GuestGroup{}, &FieldError{Source: s.Source, Path: path, Err: ErrNotScalable, Msg: fmt.Sprintf(format, args...)}
	}
	var scaled []GuestGroup
	var names []string
	for _, g := range s.Guests {
		if s.scaled(g) {
			scaled = append(scaled, g)
			names = append(names, g.Name)
		}
	}
	switch {
	case len(scaled) == 0:
		return fail("fleet.scale", "missing: a capacity search grows the one group fleet.scale sets the count of")
	case len(scaled) > 1:
		return fail("fleet.scale", "scales %d groups (%s): a capacity search grows one; make the others kind %s or give each its own scenario",
			len(scaled), strings.Join(names, ", "), BaselineKind)
	case len(s.Fleet.Modes) > 1:
		return fail("fleet.concurrency", "lists %d modes: a capacity search decides each size on one (together, the default with fleet.scale)", len(s.Fleet.Modes))
	case s.Noise != nil && len(s.Noise.Profiles) > 1:
		return fail("noise.profiles", "lists %d profiles: a capacity search decides each size on one", len(s.Noise.Profiles))
	}
	return scaled[0], nil
}

// AtSize returns a copy of the spec whose one phase launches size guests
// in each scaled group: one size of a sweep, or of a capacity search,
// stored as a run of the same scenario whose samples say their fleet size.
func (s *Spec) AtSize(size int) *Spec {
	c := s.clone()
	c.Fleet.Scale = []int{size}
	for i := range c.Guests {
		if c.scaled(c.Guests[i]) {
			c.Guests[i].Count = size
		}
	}
	return c
}
