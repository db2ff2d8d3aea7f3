package telemetry

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func fakeClock() func() time.Time {
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return func() time.Time { t = t.Add(10 * time.Second); return t }
}

func TestPlainProgressIsOneLinePerItemWithoutEscapes(t *testing.T) {
	var buf bytes.Buffer
	p := NewProgress(&buf, false)
	p.now = fakeClock()
	p.Phase("measure", 3)
	p.Item("cpu on host (rep 1)", nil)
	p.Item("cpu on container (rep 1)", errors.New("exit status 1: boom\nmore"))
	p.Logf("note %d", 7)
	p.Item("fio on host (rep 1)", nil)
	p.Done()
	out := buf.String()
	if strings.Contains(out, "\x1b") || strings.Contains(out, "\r") {
		t.Fatalf("plain output has terminal escapes: %q", out)
	}
	for _, want := range []string{"measure: 3", "[1/3] cpu on host (rep 1) ok, eta", "[2/3] cpu on container (rep 1) FAILED: exit status 1: boom …", "note 7", "[3/3] fio on host (rep 1) ok\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}

func TestTTYProgressRedrawsAndKeepsFailures(t *testing.T) {
	var buf bytes.Buffer
	p := NewProgress(&buf, true)
	p.now = fakeClock()
	p.Phase("measure", 2)
	p.Item("a", nil)
	p.Item("b", errors.New("bad"))
	p.Done()
	out := buf.String()
	if !strings.Contains(out, "\r\x1b[K") {
		t.Fatalf("no redraw on a terminal: %q", out)
	}
	if strings.Contains(out, "] a ok") {
		t.Errorf("successful items should only update the status line: %q", out)
	}
	if !strings.Contains(out, "[2/2] b FAILED: bad") {
		t.Errorf("failure not printed permanently: %q", out)
	}
	if !strings.HasSuffix(out, "\r\x1b[K") {
		t.Errorf("Done must clear the status line: %q", out)
	}
}

type notApplicableErr struct{}

func (notApplicableErr) Error() string       { return "not supported in this guest: no tracer" }
func (notApplicableErr) NotApplicable() bool { return true }

// An item that could not run where it was asked to says so, and is no
// failure.
func TestNotApplicableItemIsNoFailure(t *testing.T) {
	var buf bytes.Buffer
	p := NewProgress(&buf, false)
	p.now = fakeClock()
	p.Phase("measure", 1)
	p.Item("osnoise on vm (rep 1)", fmt.Errorf("wrapped: %w", notApplicableErr{}))
	p.Done()
	if out := buf.String(); !strings.Contains(out, "[1/1] osnoise on vm (rep 1) wrapped: not supported in this guest: no tracer") || strings.Contains(out, "FAILED") {
		t.Errorf("progress:\n%s", out)
	}
	if p.failed != 0 {
		t.Errorf("%d failed, want none", p.failed)
	}
}
