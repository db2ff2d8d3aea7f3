package guesttest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/vfleet/vfleet/internal/guest"
)

// A kind's probe skips the suite only with a reason, only on a host that
// did not promise the kind: a probe that regresses into refusing fails
// where the kind must run.
func TestProbeVerdict(t *testing.T) {
	missing := fmt.Errorf("%w: runc not found (Debian package runc)", guest.ErrNotSupported)
	for _, c := range []struct {
		name     string
		err      error
		required bool
		fail     bool
		why      bool
	}{
		{name: "runs", err: nil, why: false},
		{name: "runs where required", err: nil, required: true, why: false},
		{name: "absent", err: missing, fail: false, why: true},
		{name: "absent where required", err: missing, required: true, fail: true, why: true},
		{name: "bare sentinel", err: guest.ErrNotSupported, fail: true, why: true},
		{name: "broken probe", err: errors.New("exec: fork failed"), fail: true, why: true},
	} {
		fail, why := probeVerdict("k", c.err, c.required)
		if fail != c.fail || (why != "") != c.why {
			t.Errorf("%s: fail %v, why %q; want fail %v and a reason: %v", c.name, fail, why, c.fail, c.why)
		}
	}
}

func TestRequiredKinds(t *testing.T) {
	for env, want := range map[string]map[string]bool{
		"":               {"host": false, "vm": false},
		"all":            {"host": true, "vm": true},
		"host,container": {"host": true, "container": true, "vm": false},
	} {
		t.Setenv(RequiredKindsEnv, env)
		for kind, w := range want {
			if got := required(kind); got != w {
				t.Errorf("%s=%q: required(%s) = %v", RequiredKindsEnv, env, kind, got)
			}
		}
	}
}

type runtimedKind struct{ guest.Kind }

func (runtimedKind) Runtimes() []string                { return []string{"first", "other"} }
func (runtimedKind) RuntimeTraits(string) guest.Traits { return guest.Traits{} }

// A host that promises a kind promises its default runtime only: another
// runtime it cannot run (crun on a hybrid cgroup layout) is skipped.
func TestOnlyTheDefaultRuntimeIsPromised(t *testing.T) {
	k := runtimedKind{}
	for rt, want := range map[string]bool{"": true, "first": true, "other": false} {
		if got := (Options{Kind: k, Runtime: rt}).defaultRuntime(); got != want {
			t.Errorf("runtime %q: default %v, want %v", rt, got, want)
		}
	}
	if !(Options{}).defaultRuntime() {
		t.Error("a kind of one runtime runs its default")
	}
}
