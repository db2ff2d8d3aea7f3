package session

import (
	"context"
	"fmt"
	"io"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/store"
)

// prober asks the kinds whether this host runs a group, each question
// once: both sides of an A/B run then get the same answers and drop the
// same optional groups, and a probe that starts a container runs once.
type prober struct {
	answers map[string]error
}

func newProber() *prober { return &prober{answers: map[string]error{}} }

// ask returns the answer to the question key, asking probe the first time.
func (p *prober) ask(key string, probe func() error) error {
	if err, done := p.answers[key]; done {
		return err
	}
	err := probe()
	p.answers[key] = err
	return err
}

// kind asks the group's kind whether it runs the group's runtime here.
func (p *prober) kind(ctx context.Context, g scenario.GuestGroup) error {
	return p.ask("kind "+g.Kind+"/"+g.Runtime, func() error {
		k, err := guest.Lookup(g.Kind)
		if err != nil {
			return err
		}
		return k.Probe(ctx, g.Runtime)
	})
}

// spec asks a kind that needs the group's whole spec and its image
// (guest.SpecProber) whether it runs the group here; the others have
// answered already.
func (p *prober) spec(ctx context.Context, g scenario.GuestGroup, env guest.Env) error {
	k, err := guest.Lookup(g.Kind)
	if err != nil {
		return err
	}
	sp, ok := k.(guest.SpecProber)
	if !ok {
		return nil
	}
	// Every guest of the group has one of these specs but its name.
	for _, s := range g.Variants() {
		if err := p.ask(fmt.Sprintf("spec %s %s %#v", g.Kind, env.RootFS, s), func() error { return sp.ProbeSpec(ctx, s, env) }); err != nil {
			return err
		}
	}
	return nil
}

// dropRefused drops from each spec the optional groups refuse turns down
// as not supported here and says so on w, once per group and reason; any
// other refusal is the error.
func dropRefused(specs []*scenario.Spec, w io.Writer, refuse func(scenario.GuestGroup) error) error {
	said := map[store.DroppedGroup]bool{}
	for _, spec := range specs {
		dropped, err := spec.DropRefused(refuse)
		if err != nil {
			return err
		}
		for _, d := range dropped {
			if !said[d] {
				said[d] = true
				fmt.Fprintf(w, "vfleet: optional guest group %q (%s) is not run here: %s\n", d.Name, d.What(), d.Reason)
			}
		}
	}
	return nil
}
