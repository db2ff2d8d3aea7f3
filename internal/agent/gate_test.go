package agent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// buildC compiles a C file of vfleet's own for the host with extra flags.
func buildC(t *testing.T, src string, flags ...string) string {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no C compiler here (scripts/deps.sh installs gcc)")
	}
	out := filepath.Join(t.TempDir(), filepath.Base(src)+".out")
	argv := append(append([]string{"-O2", "-Wall", "-Werror"}, flags...), "-o", out, src)
	if b, err := exec.Command(cc, argv...).CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v: %s", src, err, b)
	}
	return out
}

func buildGate(t *testing.T) string {
	return buildC(t, "../image/native/src/start-gate.c", "-shared", "-fPIC")
}

// startGatedServer serves with the start gate at lib.
func startGatedServer(t *testing.T, lib string) *Client {
	t.Helper()
	return dial(t, startServerWith(t, func(s *Server) { s.StartGate = lib }))
}

// A dynamically linked tool is started ahead and held: its own first
// instruction after loading runs at the moment, not before, its
// environment no longer names the gate, and its children are not held.
func TestGateHoldsADynamicToolUntilTheMoment(t *testing.T) {
	c := startGatedServer(t, buildGate(t))
	at := time.Now().Add(400 * time.Millisecond)
	r, err := c.Do(context.Background(), Request{Argv: []string{"sh", "-c", "date +%s%N; env; sh -c 'echo child ran'"}, StartAtUnixNS: at.UnixNano()})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Succeeded() || !r.Gated {
		t.Fatalf("reply = %+v, %s", r, r.Stderr)
	}
	lines := strings.Split(string(r.Stdout), "\n")
	toolClock, err := strconv.ParseInt(lines[0], 10, 64)
	if err != nil {
		t.Fatalf("tool output %q", r.Stdout)
	}
	if toolClock < at.UnixNano() || r.StartedUnixNS < at.UnixNano() {
		t.Errorf("the tool ran %s before the moment (released %s before it)", at.Sub(time.Unix(0, toolClock)), at.Sub(time.Unix(0, r.StartedUnixNS)))
	}
	if late := time.Unix(0, r.StartedUnixNS).Sub(at); late > 100*time.Millisecond {
		t.Errorf("released %s after the moment", late)
	}
	if strings.Contains(string(r.Stdout), "LD_PRELOAD") || strings.Contains(string(r.Stdout), gateFDEnv) {
		t.Errorf("the gate is left in the tool's environment:\n%s", r.Stdout)
	}
	if !strings.Contains(string(r.Stdout), "child ran") {
		t.Errorf("the tool's child did not run: %s", r.Stdout)
	}
}

// A static tool would ignore the preload and run at once, so it is started
// at the moment instead.
func TestGateLeavesAStaticToolToStartAtTheMoment(t *testing.T) {
	gateLib := buildGate(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "clock.c")
	if err := os.WriteFile(src, []byte("#include <stdio.h>\n#include <time.h>\nint main(void){struct timespec ts; clock_gettime(CLOCK_REALTIME,&ts); printf(\"%lld\\n\",(long long)ts.tv_sec*1000000000LL+ts.tv_nsec); return 0;}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	static := buildC(t, src, "-static")
	if gateable(exec.Command(static), gateLib) {
		t.Fatal("a static tool counted as gateable")
	}
	if !gateable(exec.Command("sh"), gateLib) || gateable(exec.Command("sh"), src) {
		t.Fatal("gateable does not follow the tool and the library")
	}
	withPreload := exec.Command("sh")
	withPreload.Env = []string{"LD_PRELOAD=/lib/x.so"}
	if gateable(withPreload, gateLib) {
		t.Fatal("a tool with its own preload counted as gateable")
	}

	c := startGatedServer(t, gateLib)
	at := time.Now().Add(300 * time.Millisecond)
	r, err := c.Do(context.Background(), Request{Argv: []string{static}, StartAtUnixNS: at.UnixNano()})
	if err != nil || !r.Succeeded() || r.Gated {
		t.Fatalf("reply = %+v, %v", r, err)
	}
	if ran, _ := strconv.ParseInt(strings.TrimSpace(string(r.Stdout)), 10, 64); ran < at.UnixNano() {
		t.Errorf("the static tool ran %s before the moment", at.Sub(time.Unix(0, ran)))
	}
}

// A held tool whose execution is cancelled never runs its main.
func TestCancelledHeldToolNeverRuns(t *testing.T) {
	c := startGatedServer(t, buildGate(t))
	marker := filepath.Join(t.TempDir(), "ran")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	r, err := c.Do(ctx, Request{Argv: []string{"sh", "-c", "touch " + marker}, StartAtUnixNS: time.Now().Add(3 * time.Second).UnixNano()})
	if err == nil {
		t.Fatalf("a cancelled execution answered %+v", r)
	}
	time.Sleep(3500 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the held tool ran although its execution was cancelled")
	}
	if out, _ := exec.Command("pgrep", "-f", "touch "+marker).Output(); len(out) > 0 {
		t.Fatalf("the held tool is still running: pid %s", out)
	}
}
