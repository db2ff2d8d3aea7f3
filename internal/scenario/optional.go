package scenario

import (
	"errors"
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/store"
)

// DropRefused asks refuse about each of the spec's guest groups. A group
// the host cannot run (an error wrapping guest.ErrNotSupported) is taken
// out of Guests and recorded in Dropped when it is optional; any other
// refusal, or one of a required group, is returned and changes nothing.
// It returns the groups it dropped, so callers can say so.
func (s *Spec) DropRefused(refuse func(GuestGroup) error) ([]store.DroppedGroup, error) {
	var keep []GuestGroup
	var dropped []store.DroppedGroup
	for _, g := range s.Guests {
		err := refuse(g)
		switch {
		case err == nil:
			keep = append(keep, g)
		case g.Optional && errors.Is(err, guest.ErrNotSupported):
			dropped = append(dropped, store.DroppedGroup{Name: g.Name, Kind: g.Kind, Runtime: g.Runtime, Reason: err.Error()})
		default:
			return nil, fmt.Errorf("guest group %q: %w", g.Name, err)
		}
	}
	s.Guests = keep
	s.Dropped = append(s.Dropped, dropped...)
	return dropped, nil
}

// noteOptional remembers where an optional group says so, for
// checkOptional.
func (p *parser) noteOptional(g GuestGroup, at *yaml.Node) {
	if !g.Optional {
		return
	}
	if p.optionalAt == nil {
		p.optionalAt = map[string]*yaml.Node{}
	}
	p.optionalAt[g.Name] = at
}

// checkOptional refuses optional on the groups a run cannot do without:
// the baseline every value is normalised to, and the noise group.
func (p *parser) checkOptional(s *Spec) {
	for i, g := range s.Guests {
		at := p.optionalAt[g.Name]
		if at == nil {
			continue
		}
		path := fmt.Sprintf("guests[%d].optional", i)
		switch {
		case g.Name == s.Baseline:
			p.errorf(at, path, "the baseline group %q cannot be optional: every group is compared to it; remove optional, or name another group in baseline", g.Name)
		case s.noiseGroup(g.Name):
			p.errorf(at, path, "the noise group %q cannot be optional: the noise profiles run in it; remove optional", g.Name)
		}
	}
}
