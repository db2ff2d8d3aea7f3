package scenario

import (
	"maps"
	"slices"
)

// clone deep-copies the spec: nothing it holds, down to the guests'
// spreads and the sections, is shared with s, so that AtSize may rewrite
// the copy while the scenario stays as it was read.
func (s *Spec) clone() *Spec {
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
