package fleet

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/store"
)

func TestFleetNames(t *testing.T) {
	for _, ok := range []string{"quick", "a", "net-2"} {
		if err := CheckName(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "../etc", "Quick", "-x", "a/b", ".hidden", strings.Repeat("a", 41)} {
		if err := CheckName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestFleetStatePublishReadList(t *testing.T) {
	d := At(t.TempDir(), io.Discard)
	dir := d.dir()
	want := State{Name: "quick", RunID: 7, RunKey: "r7-abcdef", Scenario: "quick", Source: "/s.yaml", DB: "/r.db",
		Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Guests:  []Guest{{Name: "host", Group: "host", Kind: "host", AgentAddr: "/a.sock", PIDs: []int{42}}}}
	if err := d.Publish(want); err != nil {
		t.Fatal(err)
	}
	got, err := d.Read("quick")
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("read back %+v, %v; want %+v", got, err, want)
	}

	other := want
	other.RunID = 8
	if err := d.Publish(other); !errors.Is(err, ErrExists) {
		t.Fatalf("publishing over a fleet: err = %v, want ErrExists", err)
	}
	if got, _ := d.Read("quick"); got.RunID != 7 {
		t.Fatalf("the first fleet's state was replaced: %+v", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("files left in the fleets directory: %v", entries)
	}

	// A file being written (dot-prefixed) and stray files are not fleets.
	os.WriteFile(filepath.Join(dir, ".net.123.tmp"), []byte("{"), 0o600)
	os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o600)
	second := want
	second.Name = "net"
	if err := d.Publish(second); err != nil {
		t.Fatal(err)
	}
	all, err := d.List()
	if err != nil || len(all) != 2 || all[0].Name != "net" || all[1].Name != "quick" {
		t.Fatalf("List = %+v, %v; want net and quick", all, err)
	}

	if err := d.Remove("net"); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove("net"); err != nil {
		t.Fatalf("removing a removed fleet: %v", err)
	}
	var nf noFleetError
	if _, err := d.Read("net"); !errors.As(err, &nf) || !reflect.DeepEqual(nf.others, []string{"quick"}) {
		t.Fatalf("reading a removed fleet: %v; want noFleetError listing quick", err)
	}
}

func TestFleetStateRejectsCorruptFileClearly(t *testing.T) {
	d := At(t.TempDir(), io.Discard)
	os.MkdirAll(d.dir(), 0o700)
	os.WriteFile(d.Path("bad"), []byte("{not json"), 0o600)
	_, err := d.Read("bad")
	if err == nil || !strings.Contains(err.Error(), d.Path("bad")) {
		t.Fatalf("corrupt state file: %v; want an error naming the file", err)
	}
	if _, err := d.Read("../bad"); err == nil || errors.Is(err, ErrNoFleet) {
		t.Fatalf("a name with a path in it must be refused as a name: %v", err)
	}
}

func TestResolveFleet(t *testing.T) {
	d := At(t.TempDir(), io.Discard)
	if _, err := d.Resolve(""); !errors.Is(err, ErrNoFleet) {
		t.Fatalf("no fleets: %v", err)
	}
	for _, n := range []string{"a", "b"} {
		if err := d.Publish(State{Name: n}); err != nil {
			t.Fatal(err)
		}
		s, err := d.Resolve("")
		if n == "a" && (err != nil || s.Name != "a") {
			t.Fatalf("the only fleet: %+v, %v", s, err)
		}
		if n == "b" && (err == nil || !errors.Is(err, ErrUsage)) {
			t.Fatalf("two fleets, none named: %v", err)
		}
	}
	if s, err := d.Resolve("b"); err != nil || s.Name != "b" {
		t.Fatalf("named: %+v, %v", s, err)
	}
}

func TestFleetGoneOnceItsLedgerIs(t *testing.T) {
	d := At(t.TempDir(), io.Discard)
	s := State{Name: "x", RunKey: "r1-000000"}
	if !d.Gone(s.RunKey) {
		t.Fatal("a fleet without a ledger is gone")
	}
	if err := os.MkdirAll(filepath.Join(d.ledgerRoot(), s.RunKey), 0o700); err != nil {
		t.Fatal(err)
	}
	if d.Gone(s.RunKey) {
		t.Fatal("a fleet with its ledger is not gone")
	}
}

func TestFleetGuestsInPlanOrderWithAgents(t *testing.T) {
	plan := &scenario.Plan{Guests: []scenario.PlannedGuest{
		{Group: "host", Spec: guest.Spec{Name: "host"}},
		{Group: "vm", Spec: guest.Spec{Name: "vm"}},
		{Group: "c", Spec: guest.Spec{Name: "c-0"}},
	}}
	records := map[string]store.GuestRecord{
		"host":            {Group: "host", Kind: "host", Details: map[string]string{"agent_addr": "/h.sock"}},
		"vm":              {Group: "vm", Kind: "vm", Runtime: "q35", Details: map[string]string{"agent_socket": "/v.sock"}},
		"c-0":             {Group: "c", Kind: "container", Runtime: "runc", Details: map[string]string{"agent_addr": "/c.sock"}},
		scenario.PeerName: {Group: scenario.PeerName, Kind: "host"},
	}
	got := guests(plan, records, map[string][]int{"host": {1}, "vm": {2}, "c-0": {3}})
	want := []Guest{
		{Name: "host", Group: "host", Kind: "host", AgentAddr: "/h.sock", PIDs: []int{1}},
		{Name: "vm", Group: "vm", Kind: "vm", Runtime: "q35", AgentAddr: "/v.sock", PIDs: []int{2}},
		{Name: "c-0", Group: "c", Kind: "container", Runtime: "runc", AgentAddr: "/c.sock", PIDs: []int{3}},
		{Name: scenario.PeerName, Group: scenario.PeerName, Kind: "host"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("guests =\n%+v\nwant\n%+v", got, want)
	}
	s := State{Name: "f", Guests: got}
	if _, err := s.Guest("nope"); err == nil || !strings.Contains(err.Error(), "guests: host, vm, c-0, peer") {
		t.Fatalf("unknown guest: %v; want the known names", err)
	}
}

func TestSignalNumber(t *testing.T) {
	if n := signalNumber("killed"); n != 9 {
		t.Errorf("killed = %d, want 9", n)
	}
	if n := signalNumber("terminated"); n != 15 {
		t.Errorf("terminated = %d, want 15", n)
	}
	if n := signalNumber("no such"); n != 0 {
		t.Errorf("unknown = %d, want 0", n)
	}
}

func TestForgetFleetKeepsAnAbortedRun(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "results.db")
	st, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	newFleetRun := func() int64 {
		id, err := st.CreateRun(ctx, &store.Run{ScenarioName: "quick", ScenarioSource: "builtin:quick", ScenarioText: []byte("name: quick\n"),
			Baseline: "host", Started: time.Now().UTC(), Key: "r-fleet"})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	aborted, running := newFleetRun(), newFleetRun()
	if _, err := st.AbortRun(ctx, aborted, "its fleet was removed by 'vfleet clean'", time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	d := At(dir, io.Discard)
	for _, id := range []int64{aborted, running} {
		s := State{Name: "quick", RunID: id, RunKey: "r-fleet", DB: db, Started: time.Now().UTC()}
		if err := d.Publish(s); err != nil {
			t.Fatal(err)
		}
		d.Forget(ctx, s)
	}
	for id, want := range map[int64]string{aborted: store.StatusAborted, running: store.StatusComplete} {
		if r, err := st.GetRun(ctx, id); err != nil || r.Status != want {
			t.Errorf("run %d after forgetting its fleet: %q, %v; want %q", id, r.Status, err, want)
		}
	}
}
