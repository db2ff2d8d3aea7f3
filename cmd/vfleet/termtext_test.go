package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/remote"
	"github.com/vfleet/vfleet/internal/store"
)

// hostile is text a crafted runs file or a hostile machine could give: a
// window title, a screen clear and a forged line of output.
const hostile = "\x1b]0;PWNED\x07\x1b[2J\nrun FAKE: imported as #999"

// Text that came from a file or another machine is printed with its
// control characters escaped by import, runs and report: it can neither
// drive the terminal nor forge a line.
func TestStoredTextCannotDriveTheTerminal(t *testing.T) {
	c := newCLI(t)
	st, err := store.Open(c.db)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id, err := st.CreateRun(ctx, &store.Run{Key: "k-" + hostile, Origin: "host:" + hostile, ScenarioName: "s" + hostile,
		ScenarioText: []byte("name: s"), Baseline: "host", Started: time.Now(), Host: hostinfo.Fingerprint{Hostname: "m" + hostile}})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AddSamples(ctx, id, []store.Sample{{Guest: "host", Group: "host", WorkloadID: "cpu" + hostile, Workload: "cpu",
		Repetition: 1, Metric: "events_per_sec", Unit: "events/s", Value: 1, Better: "higher", At: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	if err := st.AddFailure(ctx, store.Failure{RunID: id, Guest: "g" + hostile, Group: "host", WorkloadID: "cpu", Repetition: 1,
		Error: "e" + hostile, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := st.FinishRun(ctx, id, store.StatusCompleteWithFailures, "r"+hostile, time.Now()); err != nil {
		t.Fatal(err)
	}
	st.Close()
	file := filepath.Join(c.work, "runs.vfr")
	if _, stderr, code := c.run("export", "1", "-o", file); code != 0 {
		t.Fatalf("export: exit %d, %s", code, stderr)
	}
	other := &cli{t: t, bin: c.bin, db: filepath.Join(t.TempDir(), "other.db"), work: c.work}
	for what, out := range map[string]func() (string, string, int){
		"import": func() (string, string, int) { return other.run("import", file) },
		"runs":   func() (string, string, int) { return c.run("runs") },
		"report": func() (string, string, int) { return c.run("report", "1") },
	} {
		stdout, stderr, code := out()
		if code != 0 {
			t.Errorf("%s: exit %d, %s", what, code, stderr)
		}
		text := stdout + stderr
		if strings.ContainsAny(text, "\x1b\x07") || strings.Contains(text, "\nrun FAKE") {
			t.Errorf("%s printed the controls raw:\n%q", what, text)
		}
		if !strings.Contains(text, `\x1b]0;PWNED\x07\x1b[2J\nrun FAKE`) {
			t.Errorf("%s does not show the text escaped:\n%s", what, text)
		}
	}
}

// What another machine says is shown escaped, under its name.
func TestMachineLogEscapesTheMachinesWords(t *testing.T) {
	var buf strings.Builder
	machineLog(&buf)(remote.Target{User: "root", Host: "198.18.0.2", Port: 22}, "step 1"+hostile)
	if got, want := buf.String(), `[root@198.18.0.2:22] step 1\x1b]0;PWNED\x07\x1b[2J\nrun FAKE: imported as #999`+"\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
