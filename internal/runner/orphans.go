package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/vfleet/vfleet/internal/store"
)

// AbortOrphans marks as aborted the runs still recorded as running whose
// vfleet is gone: their owner process died (SIGKILL, a crash, a full disk
// that refused even the run's end), or, for a long-lived fleet, which has
// no owner process, `vfleet clean` has just removed its resources
// (cleanedKeys, by run key). Their samples are kept. It returns the runs
// it marked.
func AbortOrphans(ctx context.Context, st *store.Store, cleanedKeys map[string]bool) ([]store.Run, error) {
	running, err := st.RunningRuns(ctx)
	if err != nil {
		return nil, err
	}
	var aborted []store.Run
	for _, r := range running {
		var reason string
		switch {
		case r.Owner.PID != 0 && !r.Owner.Alive():
			reason = fmt.Sprintf("its vfleet (pid %d) ended without finishing it", r.Owner.PID)
		case r.Owner.PID == 0 && r.Key != "" && cleanedKeys[r.Key]:
			reason = "its fleet was removed by 'vfleet clean'"
		default:
			continue
		}
		changed, err := st.AbortRun(ctx, r.ID, reason, time.Now().UTC())
		if err != nil {
			return aborted, err
		}
		if changed {
			r.Status, r.StatusReason = store.StatusAborted, reason
			aborted = append(aborted, r)
		}
	}
	return aborted, nil
}
