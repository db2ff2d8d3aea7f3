package session

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/scenario"
)

// A scenario is checked against the kinds compiled in, each group by its
// kind, and a user's image by what the kind runs: an OCI image for one
// whose agent is a host process.
func TestScenarioOptionsAskTheKindsAndCheckImages(t *testing.T) {
	opts := ScenarioOptions(t.TempDir())
	if !slices.Contains(opts.KnownKinds, probed.name) {
		t.Fatalf("known kinds %v lack %s", opts.KnownKinds, probed.name)
	}
	if err := opts.CheckGuest(scenario.GuestGroup{Name: "g", Spec: guest.Spec{Kind: probed.name}}); err == nil {
		t.Fatal("a group its kind refuses was accepted")
	}
	if err := opts.CheckGuest(scenario.GuestGroup{Name: "g", Spec: guest.Spec{Kind: "no-such-kind"}}); err == nil {
		t.Fatal("a group of an unknown kind was accepted")
	}
	missing := filepath.Join(t.TempDir(), "no-image")
	if err := opts.CheckImage(guest.Spec{Kind: probed.name, Image: missing}); err == nil {
		t.Fatalf("%s: a missing OCI image was accepted", missing)
	}
}

// A scenario another machine runs is checked here without this host:
// its CPUs, images and devices are the machine's to check.
func TestElsewhereOptionsLeaveTheHostToTheMachine(t *testing.T) {
	opts := ElsewhereOptions()
	if !opts.Elsewhere || !slices.Contains(opts.KnownKinds, probed.name) {
		t.Errorf("elsewhere %v, known kinds %v; want the host left out and %s known", opts.Elsewhere, opts.KnownKinds, probed.name)
	}
	if opts.Host != nil || opts.CheckImage != nil || opts.CheckPassthrough != nil || opts.CheckGuest != nil {
		t.Error("something of this host checks a scenario another machine runs")
	}
}
