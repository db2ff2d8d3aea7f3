package scenario

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vfleet/vfleet/scenarios"
)

var opts = Options{KnownKinds: []string{"container", "host"}}

func TestBuiltinScenariosParse(t *testing.T) {
	if len(scenarios.Names()) == 0 {
		t.Fatal("no built-in scenarios embedded")
	}
	for _, name := range scenarios.Names() {
		spec, err := Load(name, opts)
		if err != nil {
			t.Errorf("built-in %s: %v", name, err)
			continue
		}
		if spec.Source != "builtin:"+name || spec.Baseline == "" {
			t.Errorf("built-in %s: source %q baseline %q", name, spec.Source, spec.Baseline)
		}
	}
}

func TestDefaultScenarioFitsTheTimeBudget(t *testing.T) {
	spec, err := Load("default", opts)
	if err != nil {
		t.Fatal(err)
	}
	var total time.Duration
	for _, st := range spec.Expand().Steps {
		total += st.Duration
	}
	// The budget is 5 minutes end to end; tools' own set-up and the
	// guests' start come on top of the nominal durations.
	if total > 3*time.Minute {
		t.Fatalf("default scenario measures for %s nominally; keep it under 3m", total)
	}
}

const minimal = `name: t
guests:
  - kind: host
  - kind: container
workloads:
  - workload: cpu
`

func TestDefaultsAndExpansion(t *testing.T) {
	spec, err := Parse("t.yaml", []byte(minimal), opts)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Repetitions != DefaultRepetitions || spec.Warmup != DefaultWarmup || spec.Duration != DefaultDuration || spec.Baseline != "host" {
		t.Fatalf("defaults not applied: %+v", spec)
	}
	if spec.Guests[1].Name != "container" || spec.Guests[1].Count != 1 {
		t.Fatalf("guest defaults: %+v", spec.Guests[1])
	}
	if spec.Workloads[0].ID != "cpu" || spec.Workloads[0].Params["threads"] != "1" {
		t.Fatalf("workload defaults: %+v", spec.Workloads[0])
	}
	if len(spec.Hash()) != 64 {
		t.Fatalf("hash %q", spec.Hash())
	}
}

func TestExpansionOrderInterleavesGuests(t *testing.T) {
	src := `name: t
repetitions: 2
warmup: 1
guests:
  - {kind: host}
  - {name: c, kind: container, count: 2}
workloads:
  - workload: cpu
  - {workload: fio, id: rr, params: {rw: randread}, duration: 2s}
`
	spec, err := Parse("t.yaml", []byte(src), opts)
	if err != nil {
		t.Fatal(err)
	}
	plan := spec.Expand()
	var guests []string
	for _, g := range plan.Guests {
		guests = append(guests, g.Spec.Name+"/"+g.Group)
	}
	if got := strings.Join(guests, " "); got != "host/host c-0/c c-1/c" {
		t.Fatalf("guests = %s", got)
	}
	var steps []string
	for _, st := range plan.Steps[:9] {
		tag := "r"
		if st.Warmup {
			tag = "w"
		}
		steps = append(steps, st.WorkloadID+":"+st.Guest+":"+tag+string(rune('0'+st.Repetition)))
	}
	want := "cpu:host:w0 cpu:c-0:w0 cpu:c-1:w0 cpu:host:r0 cpu:c-0:r0 cpu:c-1:r0 cpu:host:r1 cpu:c-0:r1 cpu:c-1:r1"
	if got := strings.Join(steps, " "); got != want {
		t.Fatalf("steps:\n got %s\nwant %s", got, want)
	}
	if len(plan.Steps) != 18 {
		t.Fatalf("%d steps, want 18", len(plan.Steps))
	}
	last := plan.Steps[17]
	if last.WorkloadID != "rr" || last.Duration != 2*time.Second || last.Params["rw"] != "randread" || last.Params["bs"] != "4k" {
		t.Fatalf("last step = %+v", last)
	}
	// Steps own their params: changing one must not change another.
	plan.Steps[0].Params["threads"] = "9"
	if plan.Steps[1].Params["threads"] != "1" {
		t.Fatal("steps share their params map")
	}
}

func TestErrorsNameFileLineFieldAndAllowed(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"unknown kind", "name: t\nguests:\n  - kind: vmm\nworkloads:\n  - workload: cpu\n",
			[]string{"t.yaml:3:11: guests[0].kind: unknown kind \"vmm\" (known: container, host)"}},
		{"unknown workload with suggestion", "name: t\nguests:\n  - kind: host\nworkloads:\n  - workload: fiio\n",
			[]string{"t.yaml:5:15: workloads[0].workload", `did you mean "fio"`}},
		{"negative count", "name: t\nguests:\n  - kind: host\n    count: -2\nworkloads:\n  - workload: cpu\n",
			[]string{"t.yaml:4:12: guests[0].count: \"-2\" is not allowed: want a whole number >= 1"}},
		{"bad duration", "name: t\nduration: 3 seconds\nguests:\n  - kind: host\nworkloads:\n  - workload: cpu\n",
			[]string{"t.yaml:2:11: duration", "positive duration like 3s"}},
		{"unknown top-level key with suggestion", "name: t\nrepetition: 3\nguests:\n  - kind: host\nworkloads:\n  - workload: cpu\n",
			[]string{"t.yaml:2:1: repetition", `did you mean "repetitions"?`}},
		{"unknown param", "name: t\nguests:\n  - kind: host\nworkloads:\n  - workload: fio\n    params: {rww: read}\n",
			[]string{"t.yaml:6:14: workloads[0].params.rww", `did you mean "rw"?`}},
		{"bad param value", "name: t\nguests:\n  - kind: host\nworkloads:\n  - workload: fio\n    params: {rw: trim}\n",
			[]string{"workloads[0].params", "allowed: randread, randwrite, read, write"}},
		{"bad memory and cpus", "name: t\nguests:\n  - kind: container\n    memory: lots\n    cpus: 3-1\n  - kind: host\nworkloads:\n  - workload: cpu\n",
			[]string{"guests[0].memory: \"lots\"", "guests[0].cpus: \"3-1\" is not allowed: range 3-1 runs backwards"}},
		{"duplicate workload needs id", "name: t\nguests:\n  - kind: host\nworkloads:\n  - workload: cpu\n  - workload: cpu\n",
			[]string{"workloads[1].id", "appears twice", "distinct id"}},
		{"duplicate group name", "name: t\nguests:\n  - {name: a, kind: host}\n  - {name: a, kind: container}\nworkloads:\n  - workload: cpu\n",
			[]string{"guests[1].name", "already used at line 3"}},
		{"missing fields", "description: x\n", []string{"t.yaml:1:1: name: missing (required)", "guests: missing", "workloads: missing"}},
		{"no baseline", "name: t\nguests:\n  - kind: container\nworkloads:\n  - workload: cpu\n", []string{"baseline: missing"}},
		{"unknown baseline", "name: t\nbaseline: bare\nguests:\n  - kind: host\nworkloads:\n  - workload: cpu\n", []string{"t.yaml:2:11: baseline: \"bare\" is not a guest group"}},
		{"memory needs 5s", "name: t\nduration: 2s\nguests:\n  - kind: host\nworkloads:\n  - workload: memory\n", []string{"workloads[0].duration: memory needs at least 8s"}},
		{"bad name", "name: My Test\nguests:\n  - kind: host\nworkloads:\n  - workload: cpu\n", []string{"t.yaml:1:7: name"}},
		{"not yaml", "name: [unclosed\n", []string{"t.yaml:", "not valid YAML"}},
		{"guests not a list", "name: t\nguests: host\nworkloads:\n  - workload: cpu\n", []string{"t.yaml:2:9: guests: want a non-empty list"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tc.src), opts)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestAllErrorsReportedTogether(t *testing.T) {
	src := "name: t\nwarmup: -1\nguests:\n  - kind: vm\nworkloads:\n  - workload: nope\n"
	_, err := Parse("t.yaml", []byte(src), opts)
	var list ErrorList
	if !errors.As(err, &list) || len(list) < 3 {
		t.Fatalf("want at least 3 errors reported together, got %v", err)
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Line == 0 {
		t.Fatalf("individual errors must be reachable with errors.As: %v", err)
	}
}

func TestLoadUnknownReferenceListsBuiltins(t *testing.T) {
	_, err := Load("no-such-scenario", opts)
	if err == nil || !strings.Contains(err.Error(), "default") {
		t.Fatalf("err = %v, want the built-ins listed", err)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"512MiB": 512 << 20, "1GiB": 1 << 30, "256M": 256 << 20, "4096": 4096, "2G": 2 << 30, "64KiB": 64 << 10} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "1.5G", "-1M", "lots", "1X"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
}

func TestCheckGuestErrorsPointAtTheGroup(t *testing.T) {
	o := opts
	o.CheckGuest = func(g GuestGroup) error {
		if g.Kind == "host" && g.CPUs != "" {
			return errors.New("the host baseline runs without limits")
		}
		return nil
	}
	src := "name: t\nguests:\n  - kind: host\n    cpus: \"0\"\nworkloads:\n  - workload: cpu\n"
	_, err := Parse("t.yaml", []byte(src), o)
	if err == nil || !strings.Contains(err.Error(), "t.yaml:3:5: guests[0]: the host baseline runs without limits") {
		t.Fatalf("err = %v", err)
	}
}
