package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/workload"
)

// ErrToolMissing says a guest's image lacks the program a step runs.
var ErrToolMissing = errors.New("missing tool")

// toolCheck remembers, per guest group, which programs its image has: a
// group's guests share one image, so one lookup answers for all of them.
type toolCheck struct {
	mu    sync.Mutex
	found map[[2]string]error // (group, program) -> nil or the failure
}

// require fails with ErrToolMissing when g's image has no program named
// tool, before anything is run: otherwise the step fails later as a parse
// error of an empty output, or an exit status 127, which do not say why.
func (c *toolCheck) require(ctx context.Context, g guest.Guest, group, image, tool string) error {
	key := [2]string{group, tool}
	c.mu.Lock()
	err, known := c.found[key]
	c.mu.Unlock()
	if known {
		return err
	}
	reply, err := g.Exec(ctx, agent.Request{Op: agent.OpLookPath, Arg: tool})
	if err != nil {
		return err // the agent did not answer: nothing is learnt about the image
	}
	if reply.ExitCode != 0 {
		err = fmt.Errorf("%w: %s is not in %s", ErrToolMissing, tool, image)
	}
	c.mu.Lock()
	if c.found == nil {
		c.found = map[[2]string]error{}
	}
	c.found[key] = err
	c.mu.Unlock()
	return err
}

// requireNet finds, before a network step runs anything, the programs it
// runs where they run: its clients' on the client's side, its servers' and
// a net-command's pre and post programs on the server's, the peer's
// included, so that a missing one fails the step by name and place
// instead of as a server that never listens.
func (r *run) requireNet(ctx context.Context, g guest.Guest, group string, w workload.Networked, st scenario.Step) error {
	e := r.net.endsOf(g, st.Params)
	ne, err := w.NetCommand(st.Params, st.Duration, e.target)
	if err != nil {
		return err
	}
	client := []string{ne.Argv[0]}
	var server []string
	for _, b := range ne.Background {
		client = append(client, b.Argv[0])
	}
	for _, s := range w.Servers(st.Params, r.net.listen(e)) {
		server = append(server, s.Argv[0])
	}
	for _, x := range append(ne.ServerPre, ne.ServerPost...) {
		server = append(server, x.Argv[0])
	}
	for _, side := range []struct {
		g        guest.Guest
		programs []string
	}{{e.client, client}, {e.server, server}} {
		group, where := group, r.imageName(side.g)
		switch {
		case side.g == r.net.peer && r.net.remote != nil:
			group, where = scenario.PeerName, "the network peer "+r.net.remote.m.Target.String()
		case side.g == r.net.peer:
			group, where = scenario.PeerName, where+" on the network peer"
		case r.net.isPeer(side.g):
			group, where = scenario.PeerName, where+" on the network peer "+side.g.Spec().Name
		}
		for _, p := range side.programs {
			if err := r.tools.require(ctx, side.g, group, where, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// unsupportedSteps remembers, per guest group and workload, why the
// group's kernel cannot run it: its guests share the kernel (or its
// flavour), so the remaining steps are skipped with the same answer.
type unsupportedSteps struct {
	mu  sync.Mutex
	why map[[2]string]error // (group, workload id) -> the refusal
}

func (u *unsupportedSteps) of(group, workloadID string) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.why[[2]string{group, workloadID}]
}

func (u *unsupportedSteps) set(group, workloadID string, why error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.why == nil {
		u.why = map[[2]string]error{}
	}
	u.why[[2]string{group, workloadID}] = why
}

// imageName names g's image in messages.
func (r *run) imageName(g guest.Guest) string {
	if img := g.Spec().Image; img != "" {
		return "image " + img
	}
	return "vfleet's image"
}

// UserImage is a user's image made ready for guests: a root file system
// they use read-only, and the image's own environment. A VM's disk has
// neither: the vm kind boots it as it is and records it itself.
type UserImage struct {
	RootFS string
	Env    []string
	// Digest identifies the image's content, recorded with each guest.
	Digest string
}

// VariantImage is one of vfleet's images other than the default (another
// architecture, another guest kernel), with the agent of its architecture,
// which a user's VM disk of that architecture gets.
type VariantImage struct {
	RootFS, AgentPath, AgentBinary string
}
