package scenario

import (
	"maps"
	"slices"
)

// Clone returns a deep copy of the plan: nothing it holds, down to the
// steps' parameters and the spec's sections, is shared with p. A run
// resolves such a copy (placement, network attachments, adaptive rounds),
// so the plan it was given can be run again as Expand made it.
func (p *Plan) Clone() *Plan {
	c := &Plan{
		Spec:        p.Spec.clone(),
		Guests:      slices.Clone(p.Guests),
		Phases:      slices.Clone(p.Phases),
		Steps:       slices.Clone(p.Steps),
		NoiseGuests: slices.Clone(p.NoiseGuests),
	}
	for i := range c.Guests {
		c.Guests[i].Spec.Tap, c.Guests[i].Spec.Own = clonePtr(c.Guests[i].Spec.Tap), maps.Clone(c.Guests[i].Spec.Own)
	}
	for i := range c.Phases {
		ph := &c.Phases[i]
		ph.Guests, ph.Scaled = slices.Clone(ph.Guests), slices.Clone(ph.Scaled)
	}
	for i := range c.Steps {
		st := &c.Steps[i]
		st.Params, st.Together, st.Labels = maps.Clone(st.Params), slices.Clone(st.Together), maps.Clone(st.Labels)
	}
	return c
}

// clone deep-copies the spec; nil stays nil.
func (s *Spec) clone() *Spec {
	if s == nil {
		return nil
	}
	c := *s
	c.Text = slices.Clone(s.Text)
	c.Guests = slices.Clone(s.Guests)
	c.Dropped = slices.Clone(s.Dropped)
	for i := range c.Guests {
		g := &c.Guests[i]
		g.Tap, g.Own = clonePtr(g.Tap), maps.Clone(g.Own)
		if g.Spread != nil {
			spread := make(map[string][]string, len(g.Spread))
			for k, v := range g.Spread {
				spread[k] = slices.Clone(v)
			}
			g.Spread = spread
		}
	}
	c.Workloads = slices.Clone(s.Workloads)
	for i := range c.Workloads {
		c.Workloads[i].Params = maps.Clone(c.Workloads[i].Params)
	}
	c.Network = clonePtr(s.Network)
	if c.Network != nil {
		c.Network.Passthrough = slices.Clone(c.Network.Passthrough)
	}
	c.Adaptive = clonePtr(s.Adaptive)
	if s.Fleet != nil {
		f := *s.Fleet
		f.Modes, f.Scale = slices.Clone(f.Modes), slices.Clone(f.Scale)
		c.Fleet = &f
	}
	if s.Noise != nil {
		n := *s.Noise
		n.Profiles = slices.Clone(n.Profiles)
		c.Noise = &n
	}
	if s.HostSettings != nil {
		h := *s.HostSettings
		h.RTRuntimeUS = clonePtr(h.RTRuntimeUS)
		c.HostSettings = &h
	}
	return &c
}

// clonePtr copies what p points to, for a type whose fields are values
// nobody writes through; nil stays nil.
func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}
