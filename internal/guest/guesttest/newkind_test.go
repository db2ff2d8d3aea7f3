package guesttest_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/doctor"
	"github.com/vfleet/vfleet/internal/guest"
	_ "github.com/vfleet/vfleet/internal/guest/host" // the baseline
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/session"
	"github.com/vfleet/vfleet/internal/tools"
)

// frob is a guest kind added the way docs/architecture.md's "Adding a
// guest kind" says, from this file alone: it registers the program its
// guests run, declares a field of its own and keeps a cache between runs.
// What follows checks that doctor, the tools lookup, the scenario and
// clean see all three with no edit anywhere else.
type frob struct{}

const (
	frobKind    = "newkind-frob"
	frobProgram = "newkind-frobd"
	frobCache   = "frob-cache"
)

func init() {
	guest.Register(frob{})
	tools.Register(tools.Spec{Name: frobProgram, Package: "newkind-frob-tools", Banner: regexp.MustCompile(`(?m)^frobd (\S+)`)})
}

func (frob) Name() string                        { return frobKind }
func (frob) Probe(context.Context, string) error { return nil }
func (frob) New(spec guest.Spec, _ guest.Env) (guest.Guest, error) {
	if err := guest.CheckSpec(frobKind, spec); err != nil {
		return nil, err
	}
	return nil, nil
}
func (frob) Program(guest.Spec) string { return frobProgram }
func (frob) Fields() []guest.Field {
	return []guest.Field{guest.OwnIntField("shards", 1, 4)}
}
func (frob) DoctorChecks(doctor.Options) []doctor.Check {
	return []doctor.Check{doctor.ToolCheck("frob", frobProgram, "runs frob guests")}
}
func (frob) RemoveCaches(_ context.Context, stateDir string) ([]string, error) {
	dir := filepath.Join(stateDir, frobCache)
	if _, err := os.Stat(dir); err != nil {
		return nil, nil
	}
	return []string{"frob cache " + dir}, os.RemoveAll(dir)
}

func TestANewKindNeedsNoCentralEdit(t *testing.T) {
	// Its program: known to the tools lookup, recorded for its guests,
	// and checked by doctor, which says what to install.
	if s, err := tools.Lookup(frobProgram); err != nil || s.Package != "newkind-frob-tools" {
		t.Errorf("tools lookup: %+v, %v", s, err)
	}
	if p := guest.ProgramOf(guest.Spec{Kind: frobKind}); p != frobProgram {
		t.Errorf("program of a frob guest = %q", p)
	}
	k, err := guest.Lookup(frobKind)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := k.(doctor.Contributor)
	if !ok {
		t.Fatal("doctor does not see the kind's checks")
	}
	t.Setenv("PATH", t.TempDir())
	var results []doctor.Result
	for _, check := range doctor.Checks(doctor.Options{}, c) {
		if check.Name == "frob" {
			results = doctor.Run(context.Background(), []doctor.Check{check}, nil)
		}
	}
	if len(results) != 1 || results[0].Status != doctor.Missing || results[0].Fix != "apt-get install newkind-frob-tools" {
		t.Errorf("doctor on a host without the kind's program: %+v", results)
	}

	// Its field: read by the scenario as vfleet reads one, into the
	// guest's own values, checked at its line, refused on other kinds.
	opts := session.ScenarioOptions(t.TempDir())
	src := "name: t\nguests:\n  - {kind: host}\n  - {kind: " + frobKind + ", shards: 3}\nworkloads:\n  - workload: cpu\n"
	spec, err := scenario.Parse("t.yaml", []byte(src), opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := spec.Expand().Guests[1].Spec.Own.Int("shards"); got != 3 {
		t.Errorf("shards of the planned guest = %d", got)
	}
	for text, want := range map[string]string{
		strings.Replace(src, "shards: 3", "shards: 9", 1):                `t.yaml:4:34: guests[1].shards: "9" is not allowed`,
		strings.Replace(src, "kind: host}", "kind: host, shards: 2}", 1): "takes no shards (a field of kind " + frobKind + ")",
	} {
		if _, err := scenario.Parse("t.yaml", []byte(text), opts); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", text, err, want)
		}
	}

	// Its cache: removed by clean's --templates, which asks every kind.
	state := t.TempDir()
	if err := os.Mkdir(filepath.Join(state, frobCache), 0o755); err != nil {
		t.Fatal(err)
	}
	removed, err := guest.RemoveCaches(context.Background(), state)
	if err != nil || !slices.Contains(removed, "frob cache "+filepath.Join(state, frobCache)) {
		t.Errorf("caches removed: %v, %v", removed, err)
	}
	if _, err := os.Stat(filepath.Join(state, frobCache)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the kind's cache is still there: %v", err)
	}
}
