package qemu

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// statePoll is how often a save or a restore in progress is looked at:
// a template's state is tens of KiB, so both end within milliseconds.
const statePoll = 5 * time.Millisecond

// ignoreShared is the migration capability that leaves RAM in shared
// memory out of a saved state: the pages stay in the RAM file, the state
// carries only the devices and the vCPUs, and a restore maps the file.
var ignoreShared = []map[string]any{{"capability": "x-ignore-shared", "state": true}}

// saveState pauses the guest and writes its device and vCPU state to f.
// The guest stays paused.
func (q *qmpClient) saveState(ctx context.Context, f *os.File) error {
	if err := q.execute(ctx, "stop", nil, nil); err != nil {
		return err
	}
	if err := q.execute(ctx, "migrate-set-capabilities", map[string]any{"capabilities": ignoreShared}, nil); err != nil {
		return err
	}
	// QEMU 7.2 saves only to a descriptor given over the monitor (a
	// file: URI came with 8.2); a restore takes an inherited one.
	if err := q.executeWithFile(ctx, "getfd", map[string]any{"fdname": "state"}, nil, f); err != nil {
		return err
	}
	if err := q.execute(ctx, "migrate", map[string]any{"uri": "fd:state"}, nil); err != nil {
		return err
	}
	for {
		var st struct {
			Status string `json:"status"`
			Error  string `json:"error-desc"`
		}
		if err := q.execute(ctx, "query-migrate", nil, &st); err != nil {
			return err
		}
		switch st.Status {
		case "completed":
			return nil
		case "failed", "cancelled":
			return fmt.Errorf("save: migration %s: %s", st.Status, st.Error)
		}
		if err := sleepCtx(ctx, statePoll); err != nil {
			return err
		}
	}
}

// restoreState reads a saved state from descriptor fd into a QEMU started
// with -incoming defer, and resumes the guest.
func (q *qmpClient) restoreState(ctx context.Context, fd int) error {
	if err := q.execute(ctx, "migrate-set-capabilities", map[string]any{"capabilities": ignoreShared}, nil); err != nil {
		return err
	}
	if err := q.execute(ctx, "migrate-incoming", map[string]any{"uri": fmt.Sprintf("fd:%d", fd)}, nil); err != nil {
		return err
	}
	for {
		var raw json.RawMessage
		if err := q.execute(ctx, "query-status", nil, &raw); err != nil {
			return err
		}
		var st struct {
			Status string `json:"status"`
		}
		if err := json.Unmarshal(raw, &st); err != nil {
			return fmt.Errorf("query-status: %w", err)
		}
		switch st.Status {
		case "inmigrate":
		case "paused", "postmigrate":
			// The template was paused when it was saved.
			return q.execute(ctx, "cont", nil, nil)
		case "running":
			return nil
		default:
			return fmt.Errorf("restore: the VM is %s", st.Status)
		}
		if err := sleepCtx(ctx, statePoll); err != nil {
			return err
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
