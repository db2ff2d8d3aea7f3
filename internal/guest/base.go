package guest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/vfleet/vfleet/internal/agent"
)

// StartSteps create a guest's resources, pushing the undo of each onto td
// as soon as it exists, and return the connected agent and what the guest
// is. On error they return no client: whatever they made is undone by td.
type StartSteps func(ctx context.Context, td *Teardown) (*agent.Client, Info, error)

// Base is what every guest kind shares — its spec, the agent client, its
// info and the undo list, behind one lock — so a kind supplies only the
// steps that create it. Kinds embed a *Base.
type Base struct {
	spec Spec

	mu     sync.Mutex
	undo   Teardown
	client *agent.Client
	info   Info
}

// NewBase returns the shared part of a guest that has not started.
func NewBase(spec Spec) *Base { return &Base{spec: spec} }

func (b *Base) Spec() Spec { return b.spec }

func (b *Base) Info() Info {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.info
}

// Launch runs a kind's start steps: on failure everything they made is
// undone; on success the agent is kept and the boot time (from this call
// to the agent answering) recorded.
func (b *Base) Launch(ctx context.Context, steps StartSteps) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.client != nil {
		return fmt.Errorf("start guest %s: already started", b.spec.Name)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("start guest %s: %w", b.spec.Name, err)
	}
	began := time.Now()
	client, info, err := steps(ctx, &b.undo)
	if err != nil {
		return errors.Join(fmt.Errorf("start guest %s: %w", b.spec.Name, err), b.teardownLocked())
	}
	info.BootTime = time.Since(began)
	b.client, b.info = client, info
	return nil
}

// Exec runs one request through the guest's agent.
func (b *Base) Exec(ctx context.Context, req agent.Request) (agent.Reply, error) {
	b.mu.Lock()
	c := b.client
	b.mu.Unlock()
	if c == nil {
		return agent.Reply{}, fmt.Errorf("guest %s is not running", b.spec.Name)
	}
	return c.Do(ctx, req)
}

// Stop tears the guest down; it is idempotent. The caller's context is not
// used: teardown must complete after Ctrl-C too, and every undo step bounds
// itself.
func (b *Base) Stop(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.teardownLocked()
}

func (b *Base) teardownLocked() error {
	if b.client != nil {
		b.client.Close()
		b.client = nil
	}
	if err := b.undo.Run(); err != nil {
		return fmt.Errorf("stop guest %s: %w", b.spec.Name, err)
	}
	return nil
}
