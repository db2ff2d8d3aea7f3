package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/vfleet/vfleet/internal/interrupt"
	"github.com/vfleet/vfleet/internal/telemetry"
)

// The first SIGTERM a measuring command gets cancels its work, says how
// to abort instead, and is the cause a stored run names.
func TestSignalStopsTheWorkAndSaysHowToAbort(t *testing.T) {
	var out bytes.Buffer
	ctx, cancel := signalContext(telemetry.NewProgress(&out, false))
	defer cancel()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done()
	var s interrupt.Signalled
	if !errors.As(context.Cause(ctx), &s) || s.Signal != syscall.SIGTERM || !interrupted(ctx.Err()) {
		t.Errorf("cause %v; want SIGTERM, an interruption", context.Cause(ctx))
	}
	if want := "terminated: stopping after tearing everything down (again to abort; then run 'vfleet clean')"; !strings.Contains(out.String(), want) {
		t.Errorf("said %q; want %q", out.String(), want)
	}
}
