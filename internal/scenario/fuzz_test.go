package scenario

import (
	"errors"
	"testing"

	"github.com/vfleet/vfleet/scenarios"
)

// fuzzOpts are fixed rather than taken from the compiled-in guest kinds, and
// check no guest against the host, so that an input found on one machine
// fails the same way on every other.
var fuzzOpts = Options{KnownKinds: []string{"host", "container", "vm"}}

// brokenScenarios are seeds the built-ins do not cover: invalid YAML,
// the wrong shapes, aliases, limits.
var brokenScenarios = []string{
	"",
	"---\n",
	"name: x\n---\nname: y\n",
	"[1, 2",
	"name: [unclosed\n",
	"\tname: tab\n",
	"- just\n- a list\n",
	"name: x\nguests: {}\nworkloads: []\n",
	"name: x\nguests:\n  - kind: host\nworkloads:\n  - workload: nope\n",
	"name: x\nguests:\n  - kind: host\n  - &g {kind: container, count: 3}\n  - *g\nworkloads:\n  - workload: cpu\n",
	"name: x\nguests:\n  - kind: host\n  - kind: vm\n    vcpus: 289\n    memory: 9999999999TiB\n    pin_vcpus: 3-1\nworkloads:\n  - workload: cpu\n    params: {threads: 0}\n",
	"name: x\nrepetitions: 2\nadaptive: {target: 5%, max_repetitions: 1}\nguests:\n  - kind: host\nworkloads:\n  - workload: cpu\n",
	"name: x\nnoise: {profiles: [none, cpu], on: n}\nfleet: {scale: [1, 2], concurrency: [alone, together]}\nguests:\n  - kind: host\n  - {name: n, kind: container}\n  - {name: c, kind: container}\nworkloads:\n  - workload: cpu\n",
	"name: x\nnetwork: {path: bridge, pin: {client: 0, server: 9000}}\nguests:\n  - kind: host\n  - {kind: vm, network: macvtap}\nworkloads:\n  - workload: net-latency\n",
	"name: x\nguests:\n  - {name: c, kind: container, count: 2}\n  - {name: c-0, kind: container}\nworkloads:\n  - workload: cpu\n",
	"a: &a [*a]\n",
	"name: !!binary aGVsbG8=\nguests: 1\nworkloads: ~\n",
}

func FuzzParse(f *testing.F) {
	for _, name := range scenarios.Names() {
		data, err := scenarios.Lookup(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range brokenScenarios {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > MaxFileBytes {
			t.Skip("Load refuses a file this large before parsing it")
		}
		spec, err := Parse("fuzz.yaml", data, fuzzOpts)
		if err != nil {
			if spec != nil || !errors.Is(err, ErrInvalid) || err.Error() == "" {
				t.Fatalf("Parse = %v, %v: want a nil spec and an ErrInvalid with a message", spec, err)
			}
			return
		}
		checkPlan(t, spec.Expand())
	})
}

// checkPlan holds a plan to what Parse promises: no more guests and steps
// than the limits, guests of distinct names, and steps that run only in
// planned guests.
func checkPlan(t *testing.T, plan *Plan) {
	t.Helper()
	if len(plan.Guests) > MaxGuests || len(plan.Steps) > MaxSteps {
		t.Fatalf("plan of %d guests and %d steps passed limits of %d and %d", len(plan.Guests), len(plan.Steps), MaxGuests, MaxSteps)
	}
	planned := map[string]bool{}
	for _, g := range plan.Guests {
		if planned[g.Spec.Name] {
			t.Fatalf("two planned guests are named %q", g.Spec.Name)
		}
		planned[g.Spec.Name] = true
	}
	for i, st := range plan.Steps {
		for _, name := range append([]string{st.Guest}, st.Together...) {
			if name != "" && !planned[name] {
				t.Fatalf("step %d runs in %q, which is not a planned guest", i, name)
			}
		}
	}
}
