package scenario

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/guest"
	// The kinds compiled in, whose traits and fields the scenarios are
	// checked against, as the vfleet command does.
	_ "github.com/vfleet/vfleet/internal/guest/all"
	"github.com/vfleet/vfleet/internal/workload"
	"github.com/vfleet/vfleet/scenarios"
)

var opts = Options{KnownKinds: []string{"container", "host"}, Host: &testHost}

// testHost stands in for this machine, so that CPU lists and memory sizes
// are checked against the same host wherever the tests run.
var testHost = Host{CPUs: []int{0, 1, 2, 3}, MemoryBytes: 8 << 30}

// testWorkload stands in for a real adapter so that these tests do not
// depend on the parameters of the tools' adapters, which change on their own.
type testWorkload struct{}

const testName = "scenario-test"

func (testWorkload) Name() string                                 { return testName }
func (testWorkload) Defaults() workload.Params                    { return workload.Params{"mode": "a", "size": "1M"} }
func (testWorkload) MinDuration() time.Duration                   { return 2 * time.Second }
func (testWorkload) Parse(_, _ []byte) ([]workload.Sample, error) { return nil, nil }
func (testWorkload) Command(workload.Params, time.Duration) (workload.Exec, error) {
	return workload.Exec{Argv: []string{"true"}}, nil
}

func (testWorkload) Programs() []workload.Program {
	return []workload.Program{{Name: "true", Package: "coreutils"}}
}

func (testWorkload) Validate(p workload.Params) error {
	if p["mode"] != "a" && p["mode"] != "b" {
		return fmt.Errorf("%w: mode = %q: allowed: a, b", workload.ErrBadParam, workload.Clip(p["mode"]))
	}
	return nil
}

func init() { workload.Register(testWorkload{}) }

func TestBuiltinScenariosParse(t *testing.T) {
	if len(scenarios.Names()) == 0 {
		t.Fatal("no built-in scenarios embedded")
	}
	every := Options{KnownKinds: guest.KindNames(), Host: &testHost}
	for _, name := range scenarios.Names() {
		spec, err := Load(name, every)
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
	var ids []string
	for _, w := range spec.Workloads {
		ids = append(ids, w.ID)
	}
	if got := strings.Join(ids, " "); got != "cpu stream ctxswitch-same ctxswitch-split fio-randread fio-seqwrite" {
		t.Errorf("default workloads = %s", got)
	}
	var total time.Duration
	for _, st := range spec.Expand().Steps {
		total += st.Duration
	}
	// The run should take about 3 minutes on two cores; tools' own set-up
	// and the guests' start come on top of the nominal durations.
	if total > 3*time.Minute {
		t.Fatalf("default scenario measures for %s nominally; keep it under 3m", total)
	}
}

const minimal = `name: t
guests:
  - kind: host
  - kind: container
  - kind: container
workloads:
  - workload: scenario-test
`

func TestDefaults(t *testing.T) {
	spec, err := Parse("t.yaml", []byte(minimal), opts)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Repetitions != DefaultRepetitions || spec.Warmup != DefaultWarmup || spec.Duration != DefaultDuration || spec.Baseline != "host" {
		t.Fatalf("defaults not applied: %+v", spec)
	}
	var names []string
	for _, g := range spec.Guests {
		names = append(names, g.Name)
		if g.Count != 1 {
			t.Errorf("group %s count %d, want 1", g.Name, g.Count)
		}
	}
	if got := strings.Join(names, " "); got != "host container container-2" {
		t.Errorf("group names = %s", got)
	}
	w := spec.Workloads[0]
	if w.ID != testName || w.Params["mode"] != "a" || w.Params["size"] != "1M" || w.Duration != 0 {
		t.Fatalf("workload defaults: %+v", w)
	}
}

func TestValuesAreReadAndStringified(t *testing.T) {
	src := `name: full
description: all fields
repetitions: 5
warmup: 0
duration: 1m
baseline: ctr
guests:
  - {name: ctr, kind: container, runtime: crun, cpus: "0,2-3", memory: 512MiB, cpu_limit: 0.5, count: 3}
  - {kind: host}
workloads:
  - id: one
    workload: scenario-test
    params: &p {mode: b, size: 4096}
    duration: 3s
  - {id: two, workload: scenario-test, params: *p}
`
	spec, err := Parse("t.yaml", []byte(src), opts)
	if err != nil {
		t.Fatal(err)
	}
	g := spec.Guests[0]
	want := GuestGroup{Name: "ctr", Count: 3, Spec: guest.Spec{Kind: "container", Runtime: "crun", CPUs: "0,2-3", MemoryBytes: 512 << 20, CPULimit: 0.5}}
	if !reflect.DeepEqual(g, want) {
		t.Errorf("group = %+v, want %+v", g, want)
	}
	if spec.Repetitions != 5 || spec.Warmup != 0 || spec.Duration != time.Minute || spec.Baseline != "ctr" || spec.Description != "all fields" {
		t.Errorf("spec = %+v", spec)
	}
	for _, w := range spec.Workloads {
		if w.Params["mode"] != "b" || w.Params["size"] != "4096" {
			t.Errorf("%s params = %v (the alias must carry them)", w.ID, w.Params)
		}
	}
	if spec.Workloads[0].Duration != 3*time.Second || spec.Workloads[1].Duration != 0 {
		t.Errorf("durations = %s, %s", spec.Workloads[0].Duration, spec.Workloads[1].Duration)
	}
}

func TestHashFollowsTheText(t *testing.T) {
	a, err := Parse("a.yaml", []byte(minimal), opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse("b.yaml", []byte(minimal), opts)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse("a.yaml", []byte(minimal+"# a comment changes the hash\n"), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Hash()) != 64 || a.Hash() != b.Hash() || a.Hash() == c.Hash() {
		t.Fatalf("hashes %s %s %s", a.Hash(), b.Hash(), c.Hash())
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
  - {workload: scenario-test, id: aa}
  - {workload: scenario-test, id: bb, params: {mode: b}, duration: 3s}
`
	spec, err := Parse("t.yaml", []byte(src), opts)
	if err != nil {
		t.Fatal(err)
	}
	plan := spec.Expand()
	var guests []string
	for _, g := range plan.Guests {
		guests = append(guests, g.Spec.Name+"/"+g.Group+"/"+g.Spec.Kind)
	}
	if got := strings.Join(guests, " "); got != "host/host/host c-0/c/container c-1/c/container" {
		t.Fatalf("guests = %s", got)
	}
	var steps []string
	for _, st := range plan.Steps {
		tag := "r"
		if st.Warmup {
			tag = "w"
		}
		steps = append(steps, fmt.Sprintf("%s:%s:%s%d", st.WorkloadID, st.Guest, tag, st.Repetition))
	}
	want := "aa:host:w0 aa:c-0:w0 aa:c-1:w0 aa:host:r0 aa:c-0:r0 aa:c-1:r0 aa:host:r1 aa:c-0:r1 aa:c-1:r1 " +
		"bb:host:w0 bb:c-0:w0 bb:c-1:w0 bb:host:r0 bb:c-0:r0 bb:c-1:r0 bb:host:r1 bb:c-0:r1 bb:c-1:r1"
	if got := strings.Join(steps, " "); got != want {
		t.Fatalf("steps:\n got %s\nwant %s", got, want)
	}
	first, last := plan.Steps[0], plan.Steps[len(plan.Steps)-1]
	if first.Duration != DefaultDuration || first.Params["mode"] != "a" || first.Group != "host" {
		t.Errorf("first step = %+v", first)
	}
	if last.Duration != 3*time.Second || last.Params["mode"] != "b" || last.Params["size"] != "1M" || last.Group != "c" {
		t.Errorf("last step = %+v", last)
	}
	// Steps own their params: changing one must not change another.
	plan.Steps[0].Params["mode"] = "z"
	if plan.Steps[1].Params["mode"] != "a" || spec.Workloads[0].Params["mode"] != "a" {
		t.Fatal("steps share their params map")
	}
}

func TestExpansionCounts(t *testing.T) {
	for _, tc := range []struct{ reps, warm, count, want int }{
		{1, 0, 1, 2}, {3, 1, 1, 8}, {2, 2, 3, 16},
	} {
		src := fmt.Sprintf("name: t\nrepetitions: %d\nwarmup: %d\nguests:\n  - kind: host\n  - {kind: container, count: %d}\nworkloads:\n  - workload: %s\n",
			tc.reps, tc.warm, tc.count, testName)
		spec, err := Parse("t.yaml", []byte(src), opts)
		if err != nil {
			t.Fatal(err)
		}
		plan := spec.Expand()
		warm := 0
		for _, st := range plan.Steps {
			if st.Warmup {
				warm++
			}
		}
		guests := 1 + tc.count
		if len(plan.Guests) != guests || len(plan.Steps) != tc.want || warm != tc.warm*guests {
			t.Errorf("%+v: %d guests, %d steps (%d warm-ups)", tc, len(plan.Guests), len(plan.Steps), warm)
		}
	}
}

func TestErrorsNameFileLineFieldAndAllowed(t *testing.T) {
	const guests = "guests:\n  - kind: host\n"
	const work = "workloads:\n  - workload: scenario-test\n"
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"unknown kind", "name: t\nguests:\n  - kind: vmm\n" + work,
			[]string{`t.yaml:3:11: guests[0].kind: unknown kind "vmm" (known: container, host)`}},
		{"missing kind", "name: t\nguests:\n  - name: x\n" + work,
			[]string{"t.yaml:3:5: guests[0].kind: missing (required; one of: container, host)"}},
		{"unknown workload with suggestion", "name: t\n" + guests + "workloads:\n  - workload: scenario-tset\n",
			[]string{"t.yaml:5:15: workloads[0].workload: unknown workload", `did you mean "scenario-test"?`}},
		{"negative count", "name: t\nguests:\n  - kind: host\n    count: -2\n" + work,
			[]string{`t.yaml:4:12: guests[0].count: "-2" is not allowed: want a whole number from 1 to 4096`}},
		{"huge count", "name: t\nguests:\n  - kind: host\n    count: 100000\n" + work,
			[]string{`t.yaml:4:12: guests[0].count: "100000" is not allowed`}},
		{"fractional repetitions", "name: t\nrepetitions: 2.5\n" + guests + work,
			[]string{`t.yaml:2:14: repetitions: "2.5" is not allowed: want a whole number >= 1`}},
		{"bad duration", "name: t\nduration: 3 seconds\n" + guests + work,
			[]string{`t.yaml:2:11: duration: "3 seconds" is not allowed: want a positive duration of at most 24h, like 3s`}},
		{"duration over a day", "name: t\nduration: 9999999h\n" + guests + "workloads:\n  - workload: scenario-test\n    duration: 25h\n",
			[]string{`t.yaml:2:11: duration: "9999999h" is not allowed: want a positive duration of at most 24h`,
				`t.yaml:7:15: workloads[0].duration: "25h" is not allowed: want a positive duration of at most 24h`}},
		{"boolean written as a number", "name: t\nfleet: {all_or_nothing: 1}\n" + guests + work,
			[]string{`t.yaml:2:25: fleet.all_or_nothing: "1" is not allowed: want true or false`}},
		{"boolean capitalised", "name: t\nfleet: {all_or_nothing: True}\n" + guests + work,
			[]string{`t.yaml:2:25: fleet.all_or_nothing: "True" is not allowed: want true or false`}},
		{"zero duration", "name: t\n" + guests + "workloads:\n  - workload: scenario-test\n    duration: 0s\n",
			[]string{`t.yaml:6:15: workloads[0].duration: "0s" is not allowed`}},
		{"too short for the workload", "name: t\nduration: 1s\n" + guests + work,
			[]string{"t.yaml:6:5: workloads[0].duration: scenario-test needs at least 2s to measure (the duration in effect is 1s)"}},
		{"unknown top-level key with suggestion", "name: t\nrepetition: 3\n" + guests + work,
			[]string{`t.yaml:2:1: repetition: unknown field "repetition"; did you mean "repetitions"?`}},
		{"unknown key lists what is allowed", "name: t\nguests:\n  - kind: host\n    zzz: 1\n" + work,
			[]string{`t.yaml:4:5: guests[0].zzz: unknown field "zzz" (allowed: count, cpu_limit, cpus, image, kind, memory, name, network, optional, runtime, security)`}},
		// Another kind's field is no typo: the error says whose it is.
		{"another kind's field", "name: t\nguests:\n  - kind: host\n  - vcpus: 2\n    kind: container\n    rt_priority: 100\n" + work,
			[]string{`t.yaml:4:5: guests[1].vcpus: kind container takes no vcpus (a field of kind vm)`,
				`t.yaml:6:18: guests[1].rt_priority: "100" is not allowed: want a whole number from 1 to 99`}},
		{"key given twice", "name: t\nname: u\n" + guests + work,
			[]string{"t.yaml:2:1: name: given twice (first at line 1)"}},
		{"unknown param", "name: t\n" + guests + "workloads:\n  - workload: scenario-test\n    params: {mdoe: b}\n",
			[]string{`t.yaml:6:14: workloads[0].params.mdoe: scenario-test has no parameter "mdoe" (allowed: mode, size); did you mean "mode"?`}},
		{"param given twice", "name: t\n" + guests + "workloads:\n  - workload: scenario-test\n    params:\n      mode: a\n      mode: b\n",
			[]string{"t.yaml:8:7: workloads[0].params.mode: given twice (first at line 7)"}},
		{"bad param value", "name: t\n" + guests + "workloads:\n  - workload: scenario-test\n    params:\n      mode: c\n",
			[]string{`t.yaml:7:7: workloads[0].params: mode = "c": allowed: a, b`}},
		{"param not a value", "name: t\n" + guests + "workloads:\n  - workload: scenario-test\n    params: {mode: [a]}\n",
			[]string{"t.yaml:6:20: workloads[0].params.mode: want a single value, not a list"}},
		{"bad memory", "name: t\nguests:\n  - kind: container\n    memory: lots\n  - kind: host\n" + work,
			[]string{`t.yaml:4:13: guests[0].memory: "lots" is not allowed: want a size like 512MiB`}},
		{"zero memory", "name: t\nguests:\n  - kind: container\n    memory: 0\n  - kind: host\n" + work,
			[]string{`t.yaml:4:13: guests[0].memory: "0" is not allowed: want a positive size`}},
		{"backwards cpus", "name: t\nguests:\n  - kind: container\n    cpus: 3-1\n  - kind: host\n" + work,
			[]string{`t.yaml:4:11: guests[0].cpus: "3-1" is not allowed: range 3-1 runs backwards`}},
		{"malformed cpus", "name: t\nguests:\n  - kind: container\n    cpus: \"0,,2\"\n  - kind: host\n" + work,
			[]string{`t.yaml:4:11: guests[0].cpus: "0,,2" is not allowed: want a cpu list like "0", "0-3" or "0,2-3"`}},
		{"cpus beyond Linux", "name: t\nguests:\n  - kind: container\n    cpus: 0-9000\n  - kind: host\n" + work,
			[]string{`guests[0].cpus: "0-9000" is not allowed: cpu numbers go up to 8191`}},
		{"same workload twice without id", "name: t\n" + guests + "workloads:\n  - workload: scenario-test\n  - workload: scenario-test\n",
			[]string{`t.yaml:5:5: workloads[0].id: missing: workload "scenario-test" appears 2 times (lines 5, 6), so each entry needs a distinct id`,
				"t.yaml:6:5: workloads[1].id: missing"}},
		{"id given on one entry only", "name: t\n" + guests + "workloads:\n  - workload: scenario-test\n  - {workload: scenario-test, id: other}\n",
			[]string{"t.yaml:5:5: workloads[0].id: missing: workload \"scenario-test\" appears 2 times"}},
		{"duplicate id", "name: t\n" + guests + "workloads:\n  - {workload: scenario-test, id: x}\n  - {workload: scenario-test, id: x}\n",
			[]string{`t.yaml:6:5: workloads[1].id: id "x" is already used at line 5`}},
		{"duplicate group name", "name: t\nguests:\n  - {name: a, kind: host}\n  - {name: a, kind: container}\n" + work,
			[]string{`t.yaml:4:5: guests[1].name: guest group name "a" is already used at line 3`}},
		{"default name taken", "name: t\nguests:\n  - {name: container, kind: host}\n  - {kind: container}\n" + work,
			[]string{`guests[1].name: guest group name "container" is already used at line 3`}},
		{"expanded names collide", "name: t\nguests:\n  - {name: c, kind: container, count: 2}\n  - {name: c-1, kind: host}\n" + work,
			[]string{`t.yaml:4:5: guests[1].name: guest "c-1" would be made by both guests[0] and guests[1]`}},
		{"missing fields", "description: x\n",
			[]string{"t.yaml:1:1: name: missing (required)", "t.yaml:1:1: guests: missing", "t.yaml:1:1: workloads: missing"}},
		{"no baseline", "name: t\nguests:\n  - kind: container\n" + work,
			[]string{`t.yaml:1:1: baseline: missing: no guest group of kind "host"`}},
		{"unknown baseline", "name: t\nbaseline: bare\n" + guests + work,
			[]string{`t.yaml:2:11: baseline: "bare" is not a guest group (groups: host)`}},
		{"bad name", "name: My Test\n" + guests + work,
			[]string{`t.yaml:1:7: name: "My Test" is not allowed: want lower-case letters, digits and '-'`}},
		{"not yaml", "name: [unclosed\n",
			[]string{"t.yaml:1: not valid YAML: did not find expected ',' or ']'"}},
		{"two documents", "name: t\n" + guests + work + "---\nname: u\n",
			[]string{"t.yaml:6:1: a scenario is one YAML document"}},
		{"not a mapping", "- name: t\n",
			[]string{"t.yaml:1:1: want a mapping of adaptive, baseline, description, duration, fleet, guests, host_settings, name, network, noise, repetitions, warmup, workloads"}},
		{"empty", "# nothing\n", []string{"t.yaml: empty scenario"}},
		{"unknown network path", "name: t\nnetwork: {path: vxlan}\n" + guests + work,
			[]string{`t.yaml:2:17: network.path: unknown network path "vxlan" (allowed: bridge, macvlan, macvtap, ovs, passthrough, routed, tc, user, veth, xdp)`}},
		{"group path without a network section", "name: t\nguests:\n  - {kind: host}\n  - {kind: container, network: xdp}\n" + work,
			[]string{`t.yaml:4:32: guests[1].network: a data path needs a network section`}},
		{"baseline on a path", "name: t\nnetwork: {path: routed}\nguests:\n  - {kind: host, network: xdp}\n" + work,
			[]string{`guests[0].network: the host baseline always reaches the peer over the host side's own direct link`}},
		{"pin not a cpu", "name: t\nnetwork:\n  pin: {client: -1, server: x}\n" + guests + work,
			[]string{"network.pin.client", "network.pin.server"}},
		{"adaptive target out of range", "name: t\nadaptive: {target: 150%}\n" + guests + work,
			[]string{`t.yaml:2:20: adaptive.target: "150%" is not allowed: want a relative half-width between 0% and 100%`}},
		{"adaptive without target", "name: t\nadaptive: {max_repetitions: 9}\n" + guests + work,
			[]string{"adaptive.target: missing"}},
		{"adaptive maximum below the minimum", "name: t\nrepetitions: 5\nadaptive: {target: 0.05, max_repetitions: 4}\n" + guests + work,
			[]string{"adaptive.max_repetitions: 4 is below repetitions (5)"}},
		{"vm on a path without VMs", "name: t\nnetwork: {path: routed}\nguests:\n  - {kind: host}\n  - {kind: vm, network: veth}\n" + work,
			[]string{"guests[1].network: path not available to VM guests: veth: a VM's NIC is a tap, which has no far end to put in the peer (VMs take bridge, macvlan, macvtap, ovs, passthrough, routed, tc, user, xdp)"}},
		{"container on a path for VMs only", "name: t\nnetwork: {path: user}\nguests:\n  - {kind: host}\n  - {kind: container}\n" + work,
			[]string{"t.yaml:5:5: guests[1].network: path not available to namespace guests: user"}},
		{"peer's client into a path without inbound connections", "name: t\nnetwork: {path: user}\nguests:\n  - {kind: host}\n  - {name: v, kind: vm}\n" +
			"workloads:\n  - workload: net-latency\n    params: {client: peer}\n",
			[]string{"t.yaml:7:15: workloads[0].params.client: client: peer cannot reach group v: "}},
		{"peer name reserved", "name: t\nguests:\n  - {name: peer, kind: container}\n  - {kind: host}\n" + work,
			[]string{`guests[0].name: "peer" is reserved for the run's network peer`}},
		{"guests not a list", "name: t\nguests: host\n" + work,
			[]string{"t.yaml:2:9: guests: want a non-empty list of guest groups"}},
		{"empty workloads", "name: t\n" + guests + "workloads: []\n",
			[]string{"t.yaml:4:12: workloads: want a non-empty list of workloads"}},
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
	src := "name: t\nwarmup: -1\nguests:\n  - kind: vm\n    memory: 1X\nworkloads:\n  - workload: nope\n  - workload: scenario-test\n    params: {mode: q}\n"
	_, err := Parse("t.yaml", []byte(src), opts)
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("err = %v, want an ErrorList", err)
	}
	var got []string
	for _, e := range list {
		got = append(got, fmt.Sprintf("%d:%s", e.Line, e.Path))
	}
	want := "2:warmup 4:guests[0].kind 5:guests[0].memory 7:workloads[0].workload 9:workloads[1].params 1:baseline"
	if strings.Join(got, " ") != want {
		t.Fatalf("errors at %s, want %s:\n%v", strings.Join(got, " "), want, err)
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Source != "t.yaml" {
		t.Fatalf("individual errors must be reachable with errors.As: %v", err)
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
	src := "name: t\nguests:\n  - kind: host\n    cpus: \"0\"\nworkloads:\n  - workload: scenario-test\n"
	_, err := Parse("t.yaml", []byte(src), o)
	if err == nil || !strings.Contains(err.Error(), "t.yaml:3:5: guests[0]: the host baseline runs without limits") {
		t.Fatalf("err = %v", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	// A file in the working directory wins over the built-in of its name.
	if err := os.WriteFile("default", []byte(minimal), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := Load("default", opts)
	if err != nil || spec.Source != "default" || spec.Name != "t" {
		t.Fatalf("Load(default) = %+v, %v; want the local file", spec, err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: t\nwarmup: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad, opts); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), bad+":2:9: warmup") {
		t.Fatalf("Load(bad) = %v; want errors naming the file", err)
	}
	_, err = Load("no-such-scenario", opts)
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "'vfleet scenarios' lists the built-ins") || strings.Contains(err.Error(), "did you mean") {
		t.Fatalf("err = %v, want not-exist saying where the built-ins are listed, and no guess", err)
	}
	if _, err = Load("isolation-spectra", opts); err == nil || !strings.Contains(err.Error(), `did you mean "isolation-spectrum"?`) {
		t.Fatalf("err = %v, want the built-in a typo is near", err)
	}
	if _, err := Load(dir, opts); err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load(a directory) = %v, want a read error", err)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"512MiB": 512 << 20, "1GiB": 1 << 30, "256M": 256 << 20, "4096": 4096, "2G": 2 << 30, "64KiB": 64 << 10, "1TiB": 1 << 40, "100B": 100} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "1.5G", "-1M", "lots", "1X", "9999999999T", "99999999999999999999"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
}

func TestSuggest(t *testing.T) {
	known := []string{"cpu", "ctxswitch", "fio", "memory", "repetitions"}
	for in, want := range map[string]string{
		"fiio": "fio", "memroy": "memory", "repetition": "repetitions", "ctxswich": "ctxswitch",
		"nope": "", "disk": "", "": "",
	} {
		if got := suggest(in, known); got != want {
			t.Errorf("suggest(%q) = %q, want %q", in, got, want)
		}
	}
}

// The reference's complete example must stay a valid scenario.
func TestDocumentedExampleParses(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "scenarios.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```yaml\n")
	example, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatal("docs/scenarios.md has no yaml example")
	}
	spec, err := Parse("docs/scenarios.md", []byte(example), opts)
	if err != nil {
		t.Fatal(err)
	}
	if plan := spec.Expand(); len(plan.Guests) != 3 || spec.Baseline != "bare" {
		t.Fatalf("example: %d guests, baseline %q", len(plan.Guests), spec.Baseline)
	}
}

func TestNetworkSectionGivesGuestsTheirPaths(t *testing.T) {
	src := `name: t
network:
  path: routed
  pin: {client: 0, server: 1}
guests:
  - {kind: host}
  - {name: plain, kind: container, count: 2}
  - {name: fast, kind: container, network: xdp}
workloads:
  - workload: scenario-test
`
	s, err := Parse("t.yaml", []byte(src), opts)
	if err != nil {
		t.Fatal(err)
	}
	if s.Network == nil || s.Network.Path != "routed" || s.Network.ClientCPU != 0 || s.Network.ServerCPU != 1 {
		t.Fatalf("network = %+v", s.Network)
	}
	got := map[string]string{}
	for _, g := range s.Expand().Guests {
		got[g.Spec.Name] = g.Network
	}
	want := map[string]string{"host": "", "plain-0": "routed", "plain-1": "routed", "fast": "xdp"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("paths = %v, want %v", got, want)
	}

	bare, err := Parse("t.yaml", []byte("name: t\nnetwork: {}\nguests:\n  - {kind: host}\n  - {kind: container}\nworkloads:\n  - workload: scenario-test\n"), opts)
	if err != nil {
		t.Fatal(err)
	}
	if n := bare.Network; n.Path != "bridge" || n.ClientCPU != NoPin || n.ServerCPU != NoPin {
		t.Fatalf("defaults = %+v, want bridge and no pinning", n)
	}
}

func TestNetworkUplink(t *testing.T) {
	const rest = "guests:\n  - {kind: host}\n  - {kind: container}\nworkloads:\n  - workload: scenario-test\n"
	s, err := Parse("t.yaml", []byte("name: t\nnetwork: {path: macvlan, uplink: enp3s0f1, peer: ssh://lab@peer.example, peer_nic: eth1}\n"+rest), opts)
	if err != nil {
		t.Fatal(err)
	}
	if s.Network.Uplink != "enp3s0f1" || s.Network.Peer != "ssh://lab@peer.example:22" || s.Network.PeerNIC != "eth1" {
		t.Fatalf("network = %+v", s.Network)
	}
	for src, want := range map[string]string{
		"network: {path: user, uplink: lab0}":  "t.yaml:2:31: network.uplink: a dedicated NIC cannot go under these paths: user: its host side confines passt",
		"network: {uplink: eth0/1}":            `t.yaml:2:19: network.uplink: not a network interface name: "eth0/1"`,
		"network: {uplink: a-name-of-16-byte}": `network.uplink: not a network interface name: "a-name-of-16-byte" (want the name of a NIC of this host, 1 to 15 bytes`,
	} {
		if _, err := Parse("t.yaml", []byte("name: t\n"+src+"\n"+rest), opts); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", src, err, want)
		}
	}
	// Paths in turn cannot also be fleet sizes or have aggressors follow
	// them.
	const lab = "network: {path: bridge, uplink: lab0, peer: ssh://lab@peer.example, peer_nic: eth1}\n"
	const two = "guests:\n  - {kind: container}\n  - {name: r, kind: container, network: routed}\nworkloads:\n  - workload: scenario-test\n"
	for extra, want := range map[string]string{
		"fleet: {scale: [1, 2]}\n":             "t.yaml:2:33: network.uplink: the NIC carries bridge, routed one at a time, and fleet places and launches its guests as one fleet across them",
		"noise: {profiles: [cpu], on: host}\n": "t.yaml:2:33: network.uplink: the NIC carries bridge, routed one at a time, and noise runs aggressors across them",
		"adaptive: {target: 5%}\n":             "t.yaml:2:33: network.uplink: the NIC carries bridge, routed one at a time, and adaptive weighs the precision of every group across them",
	} {
		if _, err := Parse("t.yaml", []byte("name: t\n"+lab+extra+two), opts); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", extra, err, want)
		}
	}
	bare := "name: t\nnetwork: {uplink: lab0}\nguests:\n  - {kind: host}\nworkloads:\n  - workload: scenario-test\n"
	if _, err := Parse("t.yaml", []byte(bare), opts); err == nil || !strings.Contains(err.Error(), "network.uplink: a dedicated NIC cannot go under these paths: no guest is on a data path") {
		t.Errorf("the baseline alone: %v", err)
	}
}

// On a dedicated NIC, a run's paths are its phases, in the order the
// scenario names them: each phase has its path's guests alone, the first
// also the bare baseline, whose floor over the NIC is measured once.
func TestPathsTakeTheNICInTurn(t *testing.T) {
	src := `name: t
network: {path: bridge, uplink: lab0, peer: ssh://lab@peer.example, peer_nic: eth1}
repetitions: 2
warmup: 0
guests:
  - {name: host, kind: host}
  - {name: c, kind: container}
  - {name: r, kind: container, network: routed}
  - {name: b2, kind: container, count: 2}
workloads:
  - workload: scenario-test
`
	s, err := Parse("t.yaml", []byte(src), opts)
	if err != nil {
		t.Fatal(err)
	}
	plan := s.Expand()
	type phase struct {
		path   string
		guests []string
	}
	var got []phase
	if !plan.NetworkPerPhase() {
		t.Error("the paths on a NIC do not build a network each")
	}
	for _, ph := range plan.Phases {
		if ph.Kind != PhasePath || !ph.Kind.OwnsNetwork() || !ph.Kind.AuditEach() {
			t.Errorf("phase %s is a %v, want a path's, which owns its network and is audited on its own", ph.Path, ph.Kind)
		}
		if !slices.Equal(ph.Guests, ph.Scaled) {
			t.Errorf("phase %s: guests %v, stopped after it %v; want all", ph.Path, ph.Guests, ph.Scaled)
		}
		got = append(got, phase{ph.Path, ph.Guests})
	}
	want := []phase{{"bridge", []string{"host", "c", "b2-0", "b2-1"}}, {"routed", []string{"r"}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("phases %+v, want %+v", got, want)
	}
	steps := map[int][]string{}
	for _, st := range plan.Steps {
		steps[st.Phase] = append(steps[st.Phase], st.Guest)
	}
	if !slices.Equal(steps[0], []string{"host", "c", "b2-0", "b2-1", "host", "c", "b2-0", "b2-1"}) || !slices.Equal(steps[1], []string{"r", "r"}) {
		t.Errorf("steps by phase %v", steps)
	}
	// One path on the NIC stays one phase, as without a NIC.
	one, err := Parse("t.yaml", []byte(strings.Replace(src, "  - {name: r, kind: container, network: routed}\n", "", 1)), opts)
	if err != nil {
		t.Fatal(err)
	}
	if plan := one.Expand(); len(plan.Phases) != 1 || plan.Phases[0].Kind != PhaseWhole || plan.NetworkPerPhase() {
		t.Errorf("one path: phases %+v", plan.Phases)
	}
}

// A remote peer and a dedicated NIC come together: the NIC leads to the
// peer's machine, and the peer is reached over the NIC only.
func TestNetworkPeer(t *testing.T) {
	const rest = "guests:\n  - {kind: host}\n  - {kind: container}\nworkloads:\n  - workload: scenario-test\n"
	dir := t.TempDir()
	key := filepath.Join(dir, "id")
	if err := os.WriteFile(key, []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, 1<<20+1), 0o600); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "t.yaml")
	s, err := Parse(src, []byte("name: t\nnetwork: {path: routed, uplink: lab0, peer: 'ssh://root@[fd00::1]:2222', peer_nic: eth1, peer_identity: id}\n"+rest), opts)
	if err != nil {
		t.Fatal(err)
	}
	if s.Network.Peer != "ssh://root@[fd00::1]:2222" || s.Network.PeerIdentity != key || s.Network.PeerKnownHosts != "" {
		t.Fatalf("network = %+v", s.Network)
	}
	for src, want := range map[string]string{
		"network: {uplink: lab0}":                                                            "t.yaml:2:19: network.uplink: a dedicated NIC needs network.peer",
		"network: {peer: 'ssh://root@h', peer_nic: eth1}":                                    "t.yaml:2:17: network.peer: a remote peer needs network.uplink, the NIC of this host wired to it",
		"network: {uplink: lab0, peer: 'ssh://root@h'}":                                      "t.yaml:2:31: network.peer_nic: missing: name the peer's interface",
		"network: {uplink: lab0, peer: 'ssh://h', peer_nic: e}":                              `t.yaml:2:31: network.peer: bad peer URL "ssh://h": no user (want ssh://USER@HOST[:PORT])`,
		"network: {peer_nic: eth1}":                                                          "t.yaml:2:10: network.peer_nic: only for a remote peer: give network.peer too, or remove it",
		"network: {uplink: lab0, peer: 'ssh://r@h', peer_nic: e, peer_known_hosts: nothere}": "network.peer_known_hosts: " + filepath.Join(dir, "nothere") + " does not exist",
		"network: {uplink: lab0, peer: 'ssh://r@h', peer_nic: e, peer_identity: fifo}":       "network.peer_identity: identity unusable: " + filepath.Join(dir, "fifo") + " is a named pipe",
		"network: {uplink: lab0, peer: 'ssh://r@h', peer_nic: e, peer_identity: /dev/zero}":  "network.peer_identity: identity unusable: /dev/zero is a character device",
		"network: {uplink: lab0, peer: 'ssh://r@h', peer_nic: e, peer_identity: big}":        "network.peer_identity: identity unusable: " + filepath.Join(dir, "big") + " is too large",
		"network: {uplink: lab0, peer: 'ssh://r@h', peer_nic: e, peer_known_hosts: fifo}":    "network.peer_known_hosts: known_hosts unusable: " + filepath.Join(dir, "fifo") + " is a named pipe",
		"network: {uplink: lab0, peer: 'ssh://r@h', peer_nic: e, peer_known_hosts: .}":       "network.peer_known_hosts: known_hosts unusable: " + dir + " is a directory",
	} {
		if _, err := Parse(filepath.Join(dir, "t.yaml"), []byte("name: t\n"+src+"\n"+rest), opts); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", src, err, want)
		}
	}
}

func TestAdaptiveSection(t *testing.T) {
	s, err := Parse("t.yaml", []byte("name: t\nrepetitions: 3\nadaptive: {target: 2.5%}\nguests:\n  - {kind: host}\nworkloads:\n  - workload: scenario-test\n"), opts)
	if err != nil {
		t.Fatal(err)
	}
	if a := s.Adaptive; a == nil || a.Target != 0.025 || a.MaxRepetitions != DefaultMaxRepetitions {
		t.Fatalf("adaptive = %+v", a)
	}
}

func TestHostSettingsSection(t *testing.T) {
	const rest = "guests:\n  - {kind: host}\nworkloads:\n  - workload: scenario-test\n"
	s, err := Parse("t.yaml", []byte("name: t\nhost_settings: {rt_runtime_us: -1, irq_affinity: 0-1}\n"+rest), opts)
	if err != nil {
		t.Fatal(err)
	}
	if h := s.HostSettings; h == nil || h.RTRuntimeUS == nil || *h.RTRuntimeUS != -1 || h.IRQAffinity != "0-1" {
		t.Fatalf("host settings = %+v", h)
	}
	for src, want := range map[string]string{
		"host_settings: {rt_runtime_us: -2}":  `t.yaml:2:32: host_settings.rt_runtime_us: "-2" is not allowed: want a whole number from -1 to 1000000`,
		"host_settings: {irq_affinity: 3-1}":  `t.yaml:2:31: host_settings.irq_affinity: "3-1" is not allowed`,
		"host_settings: {}":                   "host_settings: empty: give rt_runtime_us, irq_affinity or both",
		"host_settings: {rt_throttling: off}": `host_settings.rt_throttling: unknown field`,
	} {
		if _, err := Parse("t.yaml", []byte("name: t\n"+src+"\n"+rest), opts); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", src, err, want)
		}
	}
}

func TestBuiltinsAreWellWithinTheLimits(t *testing.T) {
	for _, name := range scenarios.Names() {
		spec, err := Load(name, Options{KnownKinds: guest.KindNames()})
		if err != nil {
			t.Fatal(err)
		}
		plan := spec.Expand()
		guests, steps := spec.plannedSize()
		if guests != len(plan.Guests) || int(steps) != len(plan.Steps) {
			t.Errorf("%s: counted %d guests and %.0f steps, Expand made %d and %d", name, guests, steps, len(plan.Guests), len(plan.Steps))
		}
		if guests > MaxGuests/4 || steps > MaxSteps/4 {
			t.Errorf("%s: %d guests, %.0f steps: too close to the limits %d and %d", name, guests, steps, MaxGuests, MaxSteps)
		}
	}
}

// A command's argv and metrics are written as YAML lists and reach the
// workload as JSON whose scalars are the text the file has; a mistake
// inside them is reported at its own line.
func TestCommandWorkloadStructuredParams(t *testing.T) {
	const head = "name: t\nguests:\n  - kind: host\nworkloads:\n  - workload: command\n    params:\n      argv: [taskset, -c, 1, ./Run]\n"
	spec, err := Parse("t.yaml", []byte(head+"      metrics:\n        - {name: index, unit: score, better: higher, regex: 'Score\\s+([0-9.]+)'}\n"), opts)
	if err != nil {
		t.Fatal(err)
	}
	p := spec.Workloads[0].Params
	if p["argv"] != `["taskset","-c","1","./Run"]` || p["metrics"] != `[{"better":"higher","name":"index","regex":"Score\\s+([0-9.]+)","unit":"score"}]` {
		t.Errorf("params = %q", p)
	}
	_, err = Parse("t.yaml", []byte(head+"      metrics:\n        - {name: a, unit: u, better: higher, json: $.a}\n        - name: b\n          unit: u\n          better: lower\n          regex: 'no group'\n"), opts)
	if err == nil || err.Error() != "t.yaml:13:18: workloads[0].params.metrics[1].regex: has no group: put the value in parentheses, like 'Score\\s+([0-9.]+)'" {
		t.Errorf("err = %v", err)
	}
	_, err = Parse("t.yaml", []byte("name: t\nguests:\n  - kind: host\nworkloads:\n  - workload: command\n    params: {argv: [x]}\n"), opts)
	if err == nil || !strings.Contains(err.Error(), "t.yaml:6:13: workloads[0].params.metrics: missing") {
		t.Errorf("err = %v", err)
	}
}

// The documented command example reads the real UnixBench output it
// points to.
func TestDocumentedCommandExample(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "workloads.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "## `command`")
	_, rest, ok := strings.Cut(section, "```yaml\n")
	example, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatal("docs/workloads.md has no yaml example for command")
	}
	spec, err := Parse("docs/workloads.md", []byte("name: t\nguests:\n  - kind: host\n"+example), opts)
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := os.ReadFile(filepath.Join("..", "workload", "testdata", "unixbench-dhry2reg.stdout"))
	if err != nil {
		t.Fatal(err)
	}
	w, _ := workload.Lookup("command")
	samples, err := workload.ParseOutput(w, spec.Workloads[0].Params, stdout, nil)
	if err != nil || len(samples) != 2 || samples[0].Value != 4750.9 {
		t.Fatalf("%v %+v", err, samples)
	}
}

// A group's image is a path relative to the scenario file that must exist
// and that the group's kind accepts; the kind may come after it.
func TestGuestImage(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "app.tar"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var checked []string
	o := opts
	o.CheckImage = func(s guest.Spec) error {
		checked = append(checked, s.Kind+" "+s.Image)
		if s.Kind == "host" {
			return errors.New("not for the host")
		}
		return nil
	}
	src := "name: t\nguests:\n  - {kind: host}\n  - {image: app.tar, kind: container}\nworkloads:\n  - workload: cpu\n"
	spec, err := Parse(filepath.Join(dir, "s.yaml"), []byte(src), o)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, "app.tar")
	if spec.Guests[1].Image != want || spec.Expand().Guests[1].Spec.Image != want || len(checked) != 1 || checked[0] != "container "+want {
		t.Errorf("image %q, checked %v", spec.Guests[1].Image, checked)
	}
	for src, wantErr := range map[string]string{
		"name: t\nguests:\n  - {kind: host}\n  - {kind: container, image: gone.tar}\nworkloads:\n  - workload: cpu\n": "s.yaml:4:30: guests[1].image: " + filepath.Join(dir, "gone.tar") + " does not exist",
		"name: t\nguests:\n  - {kind: host, image: app.tar}\nworkloads:\n  - workload: cpu\n":                         "s.yaml:3:25: guests[0].image: not for the host",
		"name: t\nguests:\n  - {kind: host, image: ''}\nworkloads:\n  - workload: cpu\n":                              "guests[0].image: empty",
	} {
		_, err := Parse(filepath.Join(dir, "s.yaml"), []byte(src), o)
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("err = %v, want %q", err, wantErr)
		}
	}
}

// A VM group's kernel and initrd are paths relative to the scenario file
// that must exist; they and the command line reach the guest's spec.
func TestVMKernelBoot(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"disk.qcow2", "vmlinuz", "initrd.img"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o := opts
	o.KnownKinds = append([]string{"vm"}, opts.KnownKinds...)
	src := "name: t\nguests:\n  - {kind: host}\n  - kind: vm\n    image: disk.qcow2\n    kernel: vmlinuz\n    initrd: initrd.img\n    cmdline: root=/dev/vda1 ro\nworkloads:\n  - workload: cpu\n"
	spec, err := Parse(filepath.Join(dir, "s.yaml"), []byte(src), o)
	if err != nil {
		t.Fatal(err)
	}
	want := guest.KernelBoot{Kernel: filepath.Join(dir, "vmlinuz"), Initrd: filepath.Join(dir, "initrd.img"), Cmdline: "root=/dev/vda1 ro"}
	if got := spec.Expand().Guests[1].Spec; got.Boot != want || got.Image != filepath.Join(dir, "disk.qcow2") {
		t.Errorf("spec = %+v, want boot %+v", got, want)
	}
	for bad, wantErr := range map[string]string{
		"kernel: vmlinuz":    "s.yaml:6:13: guests[1].kernel: " + filepath.Join(dir, "gone") + " does not exist",
		"initrd: initrd.img": "s.yaml:7:13: guests[1].initrd: " + filepath.Join(dir, "gone") + " does not exist",
	} {
		_, err := Parse(filepath.Join(dir, "s.yaml"), []byte(strings.Replace(src, bad, strings.SplitN(bad, ":", 2)[0]+": gone", 1)), o)
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("err = %v, want %q", err, wantErr)
		}
	}
	_, err = Parse(filepath.Join(dir, "s.yaml"), []byte(strings.Replace(src, "kernel: vmlinuz", "kernel: ''", 1)), o)
	if err == nil || !strings.Contains(err.Error(), "guests[1].kernel: empty: give the path of the kernel image") {
		t.Errorf("empty kernel: %v", err)
	}
}
