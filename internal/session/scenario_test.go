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
	if err := opts.CheckImage(probed.name, missing); err == nil {
		t.Fatalf("%s: a missing OCI image was accepted", missing)
	}
}
