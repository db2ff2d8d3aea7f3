package runner

import (
	"testing"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/guest/guesttest"
)

// runtimedFake is a fake kind with two runtimes: under "sandbox" its
// guests' agent lives in the guest's memory, as gVisor's does in the
// sandbox, and not under "plain", as runc's is a host process.
type runtimedFake struct{ *guesttest.Fake }

func (runtimedFake) Runtimes() []string { return []string{"plain", "sandbox"} }

func (runtimedFake) RuntimeTraits(runtime string) guest.Traits {
	return guest.Traits{AgentInGuest: runtime == "sandbox"}
}

var sandboxFake = runtimedFake{guesttest.NewFake("runtimed-fake", func(guest.Spec) guest.Info {
	return guest.Info{Kind: "runtimed-fake", ScratchDir: "/scratch"}
})}

func init() { guest.Register(sandboxFake) }

// The idle fleet's memory counts as vfleet's the agent that is a host
// process, asked of each guest's traits under its own runtime: a
// sandbox's memory is its guest's, not vfleet's agent's.
func TestDensityAsksEachGuestsTraitsUnderItsRuntime(t *testing.T) {
	_, opts := setup(t)
	sandboxFake.Reset(fake.Output())
	samples := runScenario(t, opts, `name: t
repetitions: 1
warmup: 0
duration: 1s
baseline: plain
fleet: {scale: [1]}
guests:
  - {name: plain, kind: runtimed-fake, runtime: plain}
  - {name: sandboxed, kind: runtimed-fake, runtime: sandbox}
workloads:
  - workload: cpu
`, "runtimed-fake")
	agentPSS := map[string]bool{}
	for _, s := range samples {
		if s.Metric == metricAgentPSS {
			agentPSS[s.Group] = true
		}
	}
	if !agentPSS["plain"] || agentPSS["sandboxed"] {
		t.Errorf("vfleet's agent memory stored for groups %v: want plain's only", agentPSS)
	}
}
