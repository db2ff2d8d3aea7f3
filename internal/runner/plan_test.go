package runner

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/store"
)

// resolvingScenario makes a run resolve all it can without root: a user's
// pin (base), guests the run places itself (other-*), and adaptive rounds
// it adds while the other group's results are noisy.
var resolvingScenario = strings.NewReplacer(
	"repetitions: 2\n", "repetitions: 2\nadaptive: {target: 5%, max_repetitions: 3}\nfleet: {pinning: spread}\n",
	"{name: base, kind: fake}", `{name: base, kind: fake, cpus: "0"}`,
).Replace(fakeScenario)

// noisyOthers makes the other group's headline alternate between two
// values, so an adaptive run goes on to its maximum.
func noisyOthers() {
	steady := fake.Output()
	noisy := []byte(strings.Replace(string(steady), "4283.31", "2000.00", 1))
	calls := 0
	fake.OnExec(func(g string) {
		fake.SetOutput(steady)
		if strings.HasPrefix(g, "other") {
			if calls++; calls%2 == 0 {
				fake.SetOutput(noisy)
			}
		}
	})
}

// placedGuests is what a stored run says of where each guest ran.
func placedGuests(t *testing.T, opts Options, id int64) map[string]store.GuestRecord {
	t.Helper()
	run, err := opts.Store.GetRun(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]store.GuestRecord{}
	for name, rec := range run.Guests {
		out[name] = store.GuestRecord{Group: rec.Group, CPUs: rec.CPUs, Details: rec.Details}
	}
	return out
}

// checkPlacedAlike checks that two runs of one plan placed every guest
// alike: the user's pin as given, the others where the run put them.
func checkPlacedAlike(t *testing.T, opts Options, first, second int64) {
	t.Helper()
	a, b := placedGuests(t, opts, first), placedGuests(t, opts, second)
	if base := a["base"]; base.CPUs != "0" || base.Details["pinning"] != "" {
		t.Errorf("first run: base = %+v, want the user's pin to CPU 0, not placed by the run", base)
	}
	if other := a["other-0"]; other.CPUs == "" || other.Details["pinning"] != scenario.PinSpread {
		t.Errorf("first run: other-0 = %+v, want it spread by the run", other)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("the same plan was placed differently the second time:\n first %+v\nsecond %+v", a, b)
	}
}

// The plan a run is given is the caller's: the run resolves a copy of
// its own, so the plan is left as it was and runs again the same way,
// not with the first run's placement taken for the user's pins.
func TestRunLeavesItsPlanAsGiven(t *testing.T) {
	_, opts := setup(t)
	plan, want := fakePlan(t, resolvingScenario), fakePlan(t, resolvingScenario)
	noisyOthers()
	first, err := Run(context.Background(), plan, opts)
	if err != nil {
		t.Fatal(err)
	}
	if reps := repetitionsPerGuest(t, opts, first); reps["other-0"] != 3 {
		t.Fatalf("repetitions = %v: the run added no adaptive round, so the test shows nothing", reps)
	}
	if !reflect.DeepEqual(plan, want) {
		t.Errorf("the run changed the plan it was given")
	}
	second, err := Run(context.Background(), plan, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(plan, want) {
		t.Errorf("the second run changed the plan it was given")
	}
	checkPlacedAlike(t, opts, first, second)
	if a, b := repetitionsPerGuest(t, opts, first), repetitionsPerGuest(t, opts, second); !reflect.DeepEqual(a, b) {
		t.Errorf("repetitions %v, then %v", a, b)
	}
}

// Both sides of an A/B run may be one plan: each run resolves its own.
func TestRunABOfOnePlanPlacesBothAlike(t *testing.T) {
	_, opts := setup(t)
	plan, want := fakePlan(t, resolvingScenario), fakePlan(t, resolvingScenario)
	ids, err := RunAB(context.Background(), plan, plan, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(plan, want) {
		t.Errorf("the A/B run changed the plan it was given")
	}
	checkPlacedAlike(t, opts, ids[0], ids[1])
}

// The runner's pieces resolve a plan without writing into it: where each
// guest is placed, like how it joins the network, is the run's own,
// merged into a guest's spec only as the guest starts. Run here on the
// plan itself, not on a copy, they leave its guests as they were.
func TestRunnerPiecesLeaveThePlanAsGiven(t *testing.T) {
	_, opts := setup(t)
	opts = withDefaults(opts)
	ctx := context.Background()
	plan, want := fakePlan(t, resolvingScenario), fakePlan(t, resolvingScenario)
	r, err := newRun(ctx, plan, opts)
	if err != nil {
		t.Fatal(err)
	}
	r.plan = plan
	if err := r.setup(ctx); err != nil {
		t.Fatal(err)
	}
	for phase := range plan.Phases {
		if err := r.startPhase(ctx, phase); err != nil {
			t.Fatal(err)
		}
		if err := r.endPhase(ctx, phase); err != nil {
			t.Fatal(err)
		}
	}
	if rec := r.records["other-0"]; rec.CPUs == "" {
		t.Fatalf("other-0 was recorded as %+v: the run placed nothing, so the test shows nothing", rec)
	}
	if err := r.teardown(ctx); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(plan.Guests, want.Guests) || !reflect.DeepEqual(plan.Phases, want.Phases) {
		t.Errorf("the run's pieces wrote into the plan's guests:\n got %+v\nwant %+v", plan.Guests, want.Guests)
	}
}
