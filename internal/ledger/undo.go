package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/procfs"
)

// Entry kinds whose undo lives here because no single guest kind owns them.
const (
	KindMount   = "mount"   // ID: mount point
	KindDir     = "dir"     // ID: directory removed recursively
	KindProcess = "process" // ID: pid; Data["start_time"] guards against pid reuse
)

func init() {
	RegisterUndo(KindMount, undoMount)
	RegisterUndo(KindDir, undoDir)
	RegisterUndo(KindProcess, undoProcess)
}

// RecordProcess records a running process so Clean can kill it.
func (l *Ledger) RecordProcess(pid int) (Entry, error) {
	p, err := procfs.Find(pid)
	if err != nil {
		return Entry{}, fmt.Errorf("record process: %w", err)
	}
	return l.Record(KindProcess, strconv.Itoa(pid), map[string]string{"start_time": strconv.FormatUint(p.StartTime, 10)})
}

func undoMount(_ context.Context, e Entry) error {
	// A lazy detach cannot fail on a busy mount; whatever still holds it
	// (a killed process's open file) lets go when it exits.
	err := unix.Unmount(e.ID, unix.MNT_DETACH)
	if err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return fmt.Errorf("unmount %s: %w", e.ID, err)
}

func undoDir(_ context.Context, e Entry) error {
	if err := os.RemoveAll(e.ID); err != nil {
		return fmt.Errorf("remove %s: %w", e.ID, err)
	}
	return nil
}

func undoProcess(ctx context.Context, e Entry) error {
	pid, err := strconv.Atoi(e.ID)
	if err != nil || pid <= 1 {
		return fmt.Errorf("bad pid %q in ledger", e.ID)
	}
	want, err := strconv.ParseUint(e.Data["start_time"], 10, 64)
	if err != nil {
		return fmt.Errorf("bad start time for pid %d in ledger", pid)
	}
	p := procfs.Process{PID: pid, StartTime: want}
	if !p.Alive() {
		return nil // gone, a zombie, or the pid now belongs to someone else
	}
	if err := unix.Kill(pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("kill %d: %w", pid, err)
	}
	// Wait (bounded) until it is really gone so that mounts it held can go.
	for {
		if !p.Alive() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kill %d: %w", pid, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
