package store

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/hostinfo"
)

// finishedRun stores a run of scenario name on machine, ended with status.
func finishedRun(t *testing.T, s *Store, name, machine, status string) int64 {
	t.Helper()
	return finishedRunOn(t, s, name, hostinfo.Fingerprint{Hostname: machine}, status)
}

// finishedRunOn stores a run of scenario name measured on host.
func finishedRunOn(t *testing.T, s *Store, name string, host hostinfo.Fingerprint, status string) int64 {
	t.Helper()
	ctx := context.Background()
	r := newRun()
	r.ScenarioName, r.Host = name, host
	id, err := s.CreateRun(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if status != StatusRunning {
		if err := s.FinishRun(ctx, id, status, "", r.Started.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

func TestBaselinePerScenarioAndMachineReplacedWhenSetAgain(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	at := time.Date(2026, 11, 25, 21, 0, 0, 7, time.UTC)
	first := finishedRun(t, s, "default", "lab1", StatusComplete)
	other := finishedRun(t, s, "default", "lab2", StatusComplete)
	second := finishedRun(t, s, "default", "lab1", StatusComplete)
	net := finishedRun(t, s, "network", "lab1", StatusComplete)

	for _, id := range []int64{first, other, net} {
		if _, err := s.SetBaseline(ctx, id, at); err != nil {
			t.Fatal(err)
		}
	}
	b, err := s.SetBaseline(ctx, second, at.Add(time.Hour))
	want := Baseline{ScenarioName: "default", Machine: "lab1", RunID: second, Set: at.Add(time.Hour)}
	if err != nil || b != want {
		t.Fatalf("SetBaseline = %+v, %v; want %+v", b, err, want)
	}
	requireAllSet(t, b)
	if got, err := s.GetBaseline(ctx, "default", hostinfo.Fingerprint{Hostname: "lab1"}); err != nil || got != want {
		t.Errorf("set twice: got %+v, %v; want the second run %+v", got, err, want)
	}
	if got, err := s.GetBaseline(ctx, "default", hostinfo.Fingerprint{Hostname: "lab2"}); err != nil || got.RunID != other {
		t.Errorf("another machine's baseline of the same scenario: %+v, %v", got, err)
	}
	all, err := s.Baselines(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	wantAll := []Baseline{want, {"default", "lab2", other, at}, {"network", "lab1", net, at}}
	if !reflect.DeepEqual(all, wantAll) {
		t.Errorf("Baselines = %+v\nwant %+v", all, wantAll)
	}
	if one, err := s.Baselines(ctx, "network"); err != nil || len(one) != 1 || one[0].RunID != net {
		t.Errorf("Baselines(network) = %+v, %v", one, err)
	}

	if err := s.UnsetBaseline(ctx, "default", "lab1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetBaseline(ctx, "default", hostinfo.Fingerprint{Hostname: "lab1"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("after unset: %v, want ErrNotFound", err)
	}
	if err := s.UnsetBaseline(ctx, "default", "lab1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unset twice: %v, want ErrNotFound", err)
	}
	if _, err := s.GetRun(ctx, second); err != nil {
		t.Errorf("unset must keep the run: %v", err)
	}
}

func TestBaselineMustBeACompleteRun(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	for _, status := range []string{StatusRunning, StatusCompleteWithFailures, StatusIncomplete, StatusFailed, StatusAborted} {
		id := finishedRun(t, s, "default", "lab1", status)
		if _, err := s.SetBaseline(ctx, id, time.Now()); !errors.Is(err, ErrNotComplete) {
			t.Errorf("a %s run: %v, want ErrNotComplete", status, err)
		}
	}
	if _, err := s.SetBaseline(ctx, 99, time.Now()); !errors.Is(err, ErrNotFound) {
		t.Errorf("a missing run: %v, want ErrNotFound", err)
	}
	if all, err := s.Baselines(ctx, ""); err != nil || len(all) != 0 {
		t.Errorf("refused runs were set: %+v, %v", all, err)
	}
}

// TestBaselineOfOneMachine: two boxes of one host name have a baseline
// each, a new kernel keeps the machine's, and a baseline stored under the
// host name alone (before machines were named by more) is still found,
// and replaced when the machine sets another.
func TestBaselineOfOneMachine(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	box1 := hostinfo.Fingerprint{Hostname: "debian", MachineID: "11111111aaaa", Arch: "x86_64", CPUModel: "Xeon", Kernel: "6.1.0"}
	box2 := box1
	box2.MachineID = "22222222bbbb"
	one, two := finishedRunOn(t, s, "default", box1, StatusComplete), finishedRunOn(t, s, "default", box2, StatusComplete)
	for _, id := range []int64{one, two} {
		if _, err := s.SetBaseline(ctx, id, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	upgraded := box1
	upgraded.Kernel = "6.12.0"
	for fp, want := range map[*hostinfo.Fingerprint]int64{&box1: one, &box2: two, &upgraded: one} {
		if b, err := s.GetBaseline(ctx, "default", *fp); err != nil || b.RunID != want {
			t.Errorf("%s: %+v, %v; want run %d", fp.Machine(), b, err, want)
		}
	}

	legacy := finishedRunOn(t, s, "network", hostinfo.Fingerprint{Hostname: "debian", Arch: "x86_64", CPUModel: "Xeon"}, StatusComplete)
	if _, err := s.db.ExecContext(ctx, `INSERT INTO baselines (scenario_name, machine, run_id, set_ns) VALUES ('network', 'debian', ?, 1)`, legacy); err != nil {
		t.Fatal(err)
	}
	if b, err := s.GetBaseline(ctx, "network", box1); err != nil || b.RunID != legacy || b.Machine != "debian" {
		t.Errorf("a baseline stored under the host name: %+v, %v", b, err)
	}
	newer := finishedRunOn(t, s, "network", box1, StatusComplete)
	if _, err := s.SetBaseline(ctx, newer, time.Now()); err != nil {
		t.Fatal(err)
	}
	all, err := s.Baselines(ctx, "network")
	if err != nil || len(all) != 1 || all[0].RunID != newer || all[0].Machine != box1.Machine() {
		t.Errorf("setting another must replace the old row: %+v, %v", all, err)
	}
}
