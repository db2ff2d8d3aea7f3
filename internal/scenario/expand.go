package scenario

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/workload"
)

// GuestSpec is the spec of the group's guest of this name, before the
// run gives it its network and placement.
func (g GuestGroup) GuestSpec(name string) guest.Spec {
	s := g.Spec
	s.Name = name
	return s
}

// GuestSpecAt is the spec of the group's guest i, named name: its spread
// fields' value i mod n. Round robin, so that the first k guests, a
// fleet's size k, are spread as evenly as the whole group.
func (g GuestGroup) GuestSpecAt(name string, i int) guest.Spec {
	s := g.GuestSpec(name)
	for _, f := range guest.FieldsOf(g.Kind) {
		if texts := g.Spread[f.Key]; len(texts) > 0 {
			// Each was checked when the scenario was read.
			_ = f.Set(&s, texts[i%len(texts)])
		}
	}
	return s
}

// Variants are the distinct specs of the group's guests, unnamed: one
// unless it spreads.
func (g GuestGroup) Variants() []guest.Spec {
	n := 1
	for _, texts := range g.Spread {
		n = max(n, len(texts))
	}
	out := make([]guest.Spec, n)
	for i := range out {
		out[i] = g.GuestSpecAt("", i)
	}
	return out
}

// Expand turns the spec into the guests to start and the steps to run.
//
// A group with count 1 keeps its name; a group with count N yields
// NAME-0 … NAME-(N-1). Steps go phase by phase (one per fleet size),
// then workload by workload: first the warm-ups, then repetition by
// repetition, and within a repetition every noise profile and every mode
// in turn, each guest in turn when alone. Slow drift of the machine (heat,
// other tenants) so touches every guest and every case alike instead of
// biasing whichever ran last.
func (s *Spec) Expand() *Plan {
	plan := &Plan{Spec: s}
	var fixed []string
	for _, g := range s.Guests {
		for i := 0; i < g.Count; i++ {
			pg := PlannedGuest{Group: g.Name, Network: g.Network, Spec: g.GuestSpecAt(guestName(g, i), i)}
			plan.Guests = append(plan.Guests, pg)
			switch {
			case s.noiseGroup(g.Name):
				plan.NoiseGuests = append(plan.NoiseGuests, pg.Spec.Name)
			case !s.scaled(g):
				fixed = append(fixed, pg.Spec.Name)
			}
		}
	}
	if s.Noise != nil && s.Noise.On == NoiseOnHost {
		plan.Guests = append(plan.Guests, PlannedGuest{Group: NoiseGuest, Spec: guest.Spec{Name: NoiseGuest, Kind: BaselineKind}})
		plan.NoiseGuests = append(plan.NoiseGuests, NoiseGuest)
	}
	if paths := s.pathsInTurn(); len(paths) > 1 {
		s.expandByPath(plan, paths, fixed)
		return plan
	}
	sizes := []int{0}
	if s.Fleet != nil && len(s.Fleet.Scale) > 0 {
		sizes = s.Fleet.Scale
	}
	// Each phase launches one fleet: every scaled group at once, or with
	// fleet.groups apart each group in turn.
	var sets [][]GuestGroup
	if s.Fleet != nil && s.Fleet.GroupsApart {
		for _, g := range s.Guests {
			if s.scaled(g) {
				sets = append(sets, []GuestGroup{g})
			}
		}
	} else {
		sets = [][]GuestGroup{s.Guests}
	}
	for _, size := range sizes {
		for _, set := range sets {
			phase := Phase{FleetSize: size}
			if size > 0 {
				phase.Kind = PhaseFleetSize
			}
			for _, g := range set {
				if !s.scaled(g) {
					continue
				}
				for j := 0; j < size; j++ {
					phase.Scaled = append(phase.Scaled, guestName(g, j))
				}
			}
			measured := append(append([]string(nil), fixed...), phase.Scaled...)
			phase.Guests = append(append([]string(nil), plan.NoiseGuests...), measured...)
			plan.Phases = append(plan.Phases, phase)
			plan.Steps = append(plan.Steps, s.phaseSteps(plan, len(plan.Phases)-1, size, measured)...)
		}
	}
	return plan
}

// pathsInTurn are the guests' data paths in the order the scenario first
// names them, when a dedicated NIC carries them one at a time; nil
// without one.
func (s *Spec) pathsInTurn() []string {
	if s.Network == nil || s.Network.Uplink == "" {
		return nil
	}
	return s.GuestPaths()
}

// GuestPaths are the data paths of the guests, each once, in the order
// the scenario first names them.
func (s *Spec) GuestPaths() []string {
	var paths []string
	for _, g := range s.Guests {
		if g.Network != "" && !slices.Contains(paths, g.Network) {
			paths = append(paths, g.Network)
		}
	}
	return paths
}

// expandByPath makes a phase of each path: its guests alone, and in the
// first also the guests on no path (the bare baseline's floor over the
// NIC, measured once as the studies' first row). The scenario has
// neither fleet sizes nor aggressors then (checkUplink).
func (s *Spec) expandByPath(plan *Plan, paths, fixed []string) {
	pathOf := map[string]string{}
	for _, pg := range plan.Guests {
		pathOf[pg.Spec.Name] = pg.Network
	}
	for i, path := range paths {
		var measured []string
		for _, name := range fixed {
			if pathOf[name] == path || i == 0 && pathOf[name] == "" {
				measured = append(measured, name)
			}
		}
		plan.Phases = append(plan.Phases, Phase{Kind: PhasePath, Guests: measured, Scaled: measured, Path: path})
		plan.Steps = append(plan.Steps, s.phaseSteps(plan, len(plan.Phases)-1, 0, measured)...)
	}
}

// phaseSteps lists one phase's steps over its measured guests.
func (s *Spec) phaseSteps(plan *Plan, phase, size int, measured []string) []Step {
	groupOf := map[string]string{}
	for _, g := range plan.Guests {
		groupOf[g.Spec.Name] = g.Group
	}
	modes := []string{ModeAlone}
	if s.Fleet != nil && len(s.Fleet.Modes) > 0 {
		modes = s.Fleet.Modes
	}
	profiles := []string{""}
	if s.Noise != nil {
		profiles = s.Noise.Profiles
	}
	labelled := map[string]bool{}
	for _, k := range s.labelKeys() {
		labelled[k] = true
	}
	var steps []Step
	for _, w := range s.Workloads {
		d := w.Duration
		if d == 0 {
			d = s.Duration
		}
		round := func(rep int, warm bool) {
			for _, profile := range profiles {
				for _, mode := range modes {
					base := Step{WorkloadID: w.ID, Workload: w.Workload, Duration: d, Repetition: rep, Warmup: warm,
						Phase: phase, Noise: profile, Labels: labels(labelled, size, mode, profile)}
					if mode == ModeTogether {
						st := base
						st.Params = copyParams(w.Params)
						st.Together = measured
						steps = append(steps, st)
						continue
					}
					for _, name := range measured {
						st := base
						st.Guest, st.Group, st.Params = name, groupOf[name], copyParams(w.Params)
						steps = append(steps, st)
					}
				}
			}
		}
		for rep := 0; rep < s.Warmup; rep++ {
			round(rep, true)
		}
		for rep := 0; rep < s.Repetitions; rep++ {
			round(rep, false)
		}
	}
	return steps
}

func labels(labelled map[string]bool, size int, mode, profile string) map[string]string {
	if len(labelled) == 0 {
		return nil
	}
	out := map[string]string{}
	if labelled[LabelFleetSize] {
		out[LabelFleetSize] = strconv.Itoa(size)
	}
	if labelled[LabelMode] {
		out[LabelMode] = mode
	}
	if labelled[LabelNoise] {
		out[LabelNoise] = profile
	}
	return out
}

// guestName names the i-th guest of a group; Parse relies on it to check
// that no two guests of a plan share a name.
func guestName(g GuestGroup, i int) string {
	if g.Count == 1 {
		return g.Name
	}
	return fmt.Sprintf("%s-%d", g.Name, i)
}

func copyParams(p workload.Params) workload.Params {
	out := make(workload.Params, len(p))
	for k, v := range p {
		out[k] = v
	}
	return out
}
