package scenario

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestFleetSweepExpandsPhaseByPhase(t *testing.T) {
	src := `name: sweep
repetitions: 2
warmup: 0
fleet:
  scale: [3, 1]
  pinning: {strategy: spread, reserve: 1}
guests:
  - kind: host
  - name: c
    kind: container
workloads:
  - workload: scenario-test
`
	spec, err := Parse("t.yaml", []byte(src), opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := spec.Fleet.Scale; !reflect.DeepEqual(got, []int{1, 3}) {
		t.Errorf("scale = %v, want smallest first", got)
	}
	if spec.Fleet.Pinning != (Pinning{Strategy: PinSpread, Reserve: 1}) || !reflect.DeepEqual(spec.Fleet.Modes, []string{ModeTogether}) || spec.Fleet.Idle != DefaultFleetIdle {
		t.Errorf("fleet = %+v, want spread/reserve 1, together and a 3 s idle window by default", spec.Fleet)
	}
	if spec, err := Parse("t.yaml", []byte(strings.Replace(src, "fleet:\n", "fleet:\n  idle: 500ms\n", 1)), opts); err != nil || spec.Fleet.Idle != 500*time.Millisecond {
		t.Errorf("fleet.idle: 500ms gave %v, %v", spec.Fleet, err)
	}
	plan := spec.Expand()
	if len(plan.Guests) != 4 {
		t.Fatalf("guests = %d, want the host and the largest size's 3", len(plan.Guests))
	}
	want := []Phase{
		{Kind: PhaseFleetSize, FleetSize: 1, Guests: []string{"host", "c-0"}, Scaled: []string{"c-0"}},
		{Kind: PhaseFleetSize, FleetSize: 3, Guests: []string{"host", "c-0", "c-1", "c-2"}, Scaled: []string{"c-0", "c-1", "c-2"}},
	}
	if !reflect.DeepEqual(plan.Phases, want) {
		t.Errorf("phases = %+v\nwant %+v", plan.Phases, want)
	}
	if len(plan.Steps) != 4 {
		t.Fatalf("steps = %d, want 2 phases × 2 repetitions", len(plan.Steps))
	}
	last := plan.Steps[3]
	if last.Phase != 1 || !reflect.DeepEqual(last.Together, []string{"host", "c-0", "c-1", "c-2"}) || last.Guest != "" {
		t.Errorf("last step = %+v, want phase 1 run together by every measured guest", last)
	}
	if last.Labels[LabelFleetSize] != "3" || last.Labels[LabelMode] != "" {
		t.Errorf("labels = %v, want the fleet size only (one mode is not a label)", last.Labels)
	}
}

// With groups apart, every size launches each scaled group on its own,
// beside the fixed ones, and its steps run over that group alone.
func TestFleetGroupsApart(t *testing.T) {
	src := `name: layouts
repetitions: 1
warmup: 0
fleet: {scale: [1, 2], groups: apart}
guests:
  - kind: host
  - {name: a, kind: container}
  - {name: b, kind: container}
workloads:
  - workload: scenario-test
`
	spec, err := Parse("t.yaml", []byte(src), opts)
	if err != nil {
		t.Fatal(err)
	}
	plan := spec.Expand()
	want := []Phase{
		{Kind: PhaseFleetSize, FleetSize: 1, Guests: []string{"host", "a-0"}, Scaled: []string{"a-0"}},
		{Kind: PhaseFleetSize, FleetSize: 1, Guests: []string{"host", "b-0"}, Scaled: []string{"b-0"}},
		{Kind: PhaseFleetSize, FleetSize: 2, Guests: []string{"host", "a-0", "a-1"}, Scaled: []string{"a-0", "a-1"}},
		{Kind: PhaseFleetSize, FleetSize: 2, Guests: []string{"host", "b-0", "b-1"}, Scaled: []string{"b-0", "b-1"}},
	}
	if !reflect.DeepEqual(plan.Phases, want) {
		t.Fatalf("phases = %+v\nwant %+v", plan.Phases, want)
	}
	if len(plan.Steps) != 4 {
		t.Fatalf("steps = %d, want one per phase", len(plan.Steps))
	}
	for i, st := range plan.Steps {
		if st.Phase != i || !reflect.DeepEqual(st.Together, want[i].Guests) || st.Labels[LabelFleetSize] != strconv.Itoa(want[i].FleetSize) {
			t.Errorf("step %d = %+v, want phase %d's guests together", i, st, i)
		}
	}
}

func TestConsolidationCasesAndNoiseInterleave(t *testing.T) {
	src := `name: m
repetitions: 1
warmup: 0
fleet: {concurrency: [alone, together]}
noise: {profiles: [none, cpu], cpus: "0"}
guests:
  - kind: host
  - name: c
    kind: container
workloads:
  - workload: scenario-test
`
	spec, err := Parse("t.yaml", []byte(src), opts)
	if err != nil {
		t.Fatal(err)
	}
	plan := spec.Expand()
	if !reflect.DeepEqual(plan.NoiseGuests, []string{NoiseGuest}) || plan.Guests[len(plan.Guests)-1].Spec.Kind != BaselineKind {
		t.Fatalf("noise guests = %v, want the run's own host-side noise guest", plan.NoiseGuests)
	}
	var got []string
	for _, st := range plan.Steps {
		who := st.Guest
		if st.Together != nil {
			who = strings.Join(st.Together, "+")
		}
		got = append(got, st.Labels[LabelNoise]+"/"+st.Labels[LabelMode]+"/"+who)
	}
	want := []string{"none/alone/host", "none/alone/c", "none/together/host+c", "cpu/alone/host", "cpu/alone/c", "cpu/together/host+c"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("steps = %v\nwant %v", got, want)
	}
}

func TestPlainScenarioCarriesNoLabels(t *testing.T) {
	spec, err := Parse("t.yaml", []byte(minimal), opts)
	if err != nil {
		t.Fatal(err)
	}
	plan := spec.Expand()
	if len(plan.Phases) != 1 || plan.Phases[0].Kind != PhaseWhole || plan.Phases[0].FleetSize != 0 || plan.NetworkPerPhase() {
		t.Errorf("phases = %+v, want one unsized phase", plan.Phases)
	}
	for _, st := range plan.Steps {
		if st.Labels != nil || st.Together != nil {
			t.Fatalf("step %+v: a scenario without fleet or noise must run and store as before", st)
		}
	}
}

func TestFleetErrors(t *testing.T) {
	const work = "workloads:\n  - workload: scenario-test\n"
	const guests = "guests:\n  - kind: host\n  - name: c\n    kind: container\n"
	for _, tc := range []struct{ name, src, want string }{
		{"count of a scaled group", "name: t\nfleet: {scale: [1, 2]}\nguests:\n  - kind: host\n  - kind: container\n    count: 4\n" + work,
			"t.yaml:6:12: guests[1].count: fleet.scale sets this group's count; remove count here"},
		{"nothing to scale", "name: t\nfleet: {scale: [2]}\nguests:\n  - kind: host\n" + work,
			"fleet.scale: no guest group to scale"},
		{"size twice", "name: t\nfleet: {scale: [2, 2]}\n" + guests + work, "fleet.scale[1]: fleet size 2 is listed twice"},
		{"size zero", "name: t\nfleet: {scale: [0]}\n" + guests + work, `fleet.scale[0]: "0" is not allowed: want a whole number from 1 to 4096`},
		{"unknown mode", "name: t\nfleet: {concurrency: [alone, paired]}\n" + guests + work,
			`fleet.concurrency[1]: "paired" is not allowed: want one of alone, together`},
		{"unknown pinning", "name: t\nfleet: {pinning: packed}\n" + guests + work, `fleet.pinning: "packed" is not allowed: want one of none, spread`},
		{"groups apart without scale", "name: t\nfleet: {groups: apart}\n" + guests + work, `fleet.groups: apart launches each scaled group on its own at every fleet size: it needs fleet.scale`},
		{"bad groups", "name: t\nfleet: {scale: [1], groups: some}\n" + guests + work, `fleet.groups: "some" is not allowed: want one of together, apart`},
		{"idle not a duration", "name: t\nfleet: {idle: 3}\n" + guests + work, `fleet.idle: "3" is not allowed: want a positive duration`},
		{"bad all_or_nothing", "name: t\nfleet: {all_or_nothing: maybe}\n" + guests + work, `fleet.all_or_nothing: "maybe" is not allowed: want true or false`},
		{"unknown profile", "name: t\nnoise: {profiles: [none, gpu]}\n" + guests + work,
			`noise.profiles[1]: "gpu" is not allowed: want one of none, cpu, memory, io, network`},
		{"profiles missing", "name: t\nnoise: {on: host}\n" + guests + work, "noise.profiles: missing"},
		{"noise on unknown group", "name: t\nnoise: {profiles: [cpu], on: z}\n" + guests + work, `noise.on: "z" is neither host nor a guest group (groups: host, c)`},
		{"noise on the baseline", "name: t\nbaseline: c\nnoise: {profiles: [cpu], on: c}\n" + guests + work, `noise.on: group "c" is the baseline`},
		{"noise name taken", "name: t\nnoise: {profiles: [cpu]}\nguests:\n  - kind: host\n  - name: noise\n    kind: container\n" + work,
			`noise.on: noise on the host runs in a guest named "noise"`},
		{"bad noise cpus", "name: t\nnoise: {profiles: [cpu], cpus: \"a\"}\n" + guests + work, `noise.cpus: "a" is not allowed`},
		{"adaptive with cases", "name: t\nadaptive: {target: 5%}\nfleet: {concurrency: [alone, together]}\n" + guests + work,
			"adaptive: adaptive repetitions compare like with like"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tc.src), opts)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

func TestContainersRunningTimerLatencyGetRealTime(t *testing.T) {
	src := `name: rt
guests:
  - kind: host
  - {name: c, kind: container}
  - {name: d, kind: container, rt_priority: 10}
workloads:
  - {workload: timer-latency, params: {priority: 80}}
`
	spec, err := Parse("t.yaml", []byte(src), opts)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, g := range spec.Guests {
		got[g.Name] = g.RTPriority
	}
	if want := map[string]int{"host": 0, "c": 80, "d": 10}; !reflect.DeepEqual(got, want) {
		t.Errorf("rt priorities = %v, want %v (a group's own setting kept)", got, want)
	}
	plain, err := Parse("t.yaml", []byte(minimal), opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range plain.Guests {
		if g.RTPriority != 0 {
			t.Errorf("%s granted real time without a workload that needs it", g.Name)
		}
	}
}

func TestScaledGroupAndAtSize(t *testing.T) {
	const head = "name: s\nrepetitions: 2\n"
	const work = "workloads:\n  - workload: scenario-test\n"
	spec, err := Parse("t.yaml", []byte(head+"fleet: {scale: [1, 10]}\nguests:\n  - kind: host\n  - {name: c, kind: container}\n"+work), opts)
	if err != nil {
		t.Fatal(err)
	}
	g, err := spec.ScaledGroup()
	if err != nil || g.Name != "c" {
		t.Fatalf("scaled group %q, %v; want c", g.Name, err)
	}
	plan := spec.AtSize(4).Expand()
	if len(plan.Phases) != 1 || plan.Phases[0].FleetSize != 4 || len(plan.Phases[0].Scaled) != 4 || len(plan.Guests) != 5 {
		t.Errorf("at 4: phases %+v, %d guests; want one phase of 4 scaled guests beside the host", plan.Phases, len(plan.Guests))
	}
	if !reflect.DeepEqual(spec.Fleet.Scale, []int{1, 10}) || spec.Guests[1].Count != 10 {
		t.Errorf("AtSize changed the spec: scale %v, count %d", spec.Fleet.Scale, spec.Guests[1].Count)
	}
	for _, tc := range []struct{ name, src, want string }{
		{"no scale", "guests:\n  - {name: c, kind: container}\n", "fleet.scale: missing"},
		{"two scaled", "fleet: {scale: [1, 2]}\nguests:\n  - {name: a, kind: container}\n  - {name: b, kind: container}\n", "scales 2 groups (a, b)"},
		{"two modes", "fleet: {scale: [1, 2], concurrency: [alone, together]}\nguests:\n  - {name: c, kind: container}\n", "fleet.concurrency: lists 2 modes"},
		{"two profiles", "fleet: {scale: [1, 2]}\nnoise: {profiles: [none, cpu]}\nguests:\n  - {name: c, kind: container}\n", "noise.profiles: lists 2 profiles"},
	} {
		src := strings.Replace(tc.src, "guests:\n", "guests:\n  - kind: host\n", 1)
		spec, err := Parse("t.yaml", []byte(head+src+work), opts)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		_, err = spec.ScaledGroup()
		if !errors.Is(err, ErrNotScalable) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
