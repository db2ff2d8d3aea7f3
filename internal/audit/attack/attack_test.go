package attack

import (
	"context"
	"os"
	"slices"
	"syscall"
	"testing"

	"github.com/vfleet/vfleet/internal/testutil"
)

// The test binary is the agent here: /proc/self/exe started as the user
// namespace child runs the child's attempts.
func TestMain(m *testing.M) {
	if IsChild(os.Args) {
		if err := RunChild(os.Args[2:], os.Stdout); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	testutil.Main(m)
}

// TestAttemptsOnTheHostChangeNothing makes every attempt as root on the
// host itself, where most of them go through, and checks that each
// answered and that nothing changed: no mount, no setting, no release
// agent, no traced pid 1, no file left in the working directory, the
// running binary as it was.
func TestAttemptsOnTheHostChangeNothing(t *testing.T) {
	testutil.RequiresRoot(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	state := testutil.HostState(t, self)
	dir := t.TempDir()
	got := Run(context.Background(), dir)
	testutil.CheckHostState(t, state, self)
	if ents, _ := os.ReadDir(dir); len(ents) > 0 {
		t.Errorf("left in the working directory: %v", ents)
	}
	want := []string{ReleaseAgent, CorePattern, BlockDevice, ProcRoot, ProcNS, Ptrace, DevKVM, DevMem, Module, ExeOverwrite, Shocker, UserNSMount}
	var names []string
	for _, a := range got {
		names = append(names, a.Name)
		switch {
		case a.Outcome == Blocked && a.By == "", a.Outcome == Succeeded && a.Evidence == "", a.Outcome != Blocked && a.Outcome != Succeeded:
			t.Errorf("%s: outcome %q, by %q, evidence %q", a.Name, a.Outcome, a.By, a.Evidence)
		}
		t.Logf("%s: %s %s%s", a.Name, a.Outcome, a.By, a.Evidence)
	}
	if !slices.Equal(names, want) {
		t.Errorf("attempts %q, want %q", names, want)
	}
	// Root on the host holds what these take: the core dump handler is
	// its to write, and a user namespace of its own is its to make.
	for _, a := range got {
		if (a.Name == CorePattern || a.Name == UserNSMount) && a.Outcome != Succeeded {
			t.Errorf("%s as root on the host: %s (%s), want it to go through", a.Name, a.Outcome, a.By)
		}
	}
}

// TestShortAnswers: a refusal reads as the step and the kernel's answer.
func TestShortAnswers(t *testing.T) {
	a := blocked(Attempt{Name: CorePattern}, "open for writing", &os.PathError{Op: "open", Path: "/proc/sys/kernel/core_pattern", Err: syscall.EROFS})
	if a.Outcome != Blocked || a.By != "open for writing: EROFS" {
		t.Errorf("blocked = %+v", a)
	}
}
