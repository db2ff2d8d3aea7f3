package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/testutil"

	"github.com/vfleet/vfleet/internal/runner"
	"github.com/vfleet/vfleet/internal/store"
)

// TestRunOutcomeIsTheExitStatusContract pins the exit statuses of `vfleet
// run` that docs/results.md promises, from how the runs ended.
func TestRunOutcomeIsTheExitStatusContract(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ids := map[string]int64{}
	for _, status := range []string{store.StatusComplete, store.StatusCompleteWithFailures} {
		id, err := st.CreateRun(ctx, &store.Run{ScenarioName: "s", ScenarioText: []byte("s"), Baseline: "host"})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.FinishRun(ctx, id, status, "", time.Now()); err != nil {
			t.Fatal(err)
		}
		ids[status] = id
	}
	full := fmt.Errorf("stopped: %w: database or disk is full", runner.ErrStore)
	for _, tc := range []struct {
		name   string
		ids    []int64
		runErr error
		want   int
	}{
		{"every step measured", []int64{ids[store.StatusComplete]}, nil, exitOK},
		{"some steps failed", []int64{ids[store.StatusComplete], ids[store.StatusCompleteWithFailures]}, nil, exitStepsFailed},
		{"interrupted", []int64{ids[store.StatusComplete]}, fmt.Errorf("interrupted: %w", context.Canceled), exitInterrupted},
		{"store failed", []int64{ids[store.StatusComplete]}, full, exitFailed},
		{"store failed while interrupted", []int64{ids[store.StatusComplete]}, errors.Join(context.Canceled, full), exitFailed},
		{"no guest started", []int64{ids[store.StatusComplete]}, runner.ErrNoGuests, exitFailed},
	} {
		err := runOutcome(ctx, st, tc.ids, tc.runErr)
		got := exitOK
		if err != nil {
			got = exitCode(err)
		}
		if got != tc.want {
			t.Errorf("%s: exit %d (%v), want %d", tc.name, got, err, tc.want)
		}
	}
}

// TestBadInputIsRefusedBeforeAnythingStarts runs the CLI on input that
// used to get far (a run started, guests booted) before failing, or never
// failed at all.
func TestBadInputIsRefusedBeforeAnythingStarts(t *testing.T) {
	c := newCLI(t)
	files := 0
	scenario := func(guest, fio string) string {
		files++
		p := filepath.Join(c.work, fmt.Sprintf("bad%d.yaml", files))
		text := fmt.Sprintf("name: bad\nguests:\n  - {name: host, kind: host}\n  - %s\nworkloads:\n  - {workload: fio, params: %s}\n", guest, fio)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := "{kind: container}"
	for _, tc := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"run", "/dev/zero"}, "is a character device", exitUsage},
		{[]string{"run", scenario("{kind: container, memory: \"1\"}", "{}")}, "too little for a container: give at least 16MiB", exitUsage},
		{[]string{"run", scenario(ok, "{bs: \"99999999999999999999999\"}")}, "bs = \"99999999999999999999999\": want at most 256M", exitUsage},
		{[]string{"run", scenario(ok, "{}"), "--html", "/nonexistent/r.html"}, "--html /nonexistent/r.html: no directory /nonexistent to write it in", exitUsage},
		{[]string{"run", scenario(ok, "{}"), "--html", t.TempDir()}, "is a directory", exitUsage},
		// A path whose directory looks writable, yet where no file can be
		// made, or a file that takes no write: known before any guest starts.
		{[]string{"audit", scenario(ok, "{}"), "--json", "/proc/x.json"}, "--json /proc/x.json: cannot create it", exitUsage},
		{[]string{"audit", scenario(ok, "{}"), "--json", "/dev/full"}, "--json: /dev/full is a character device", exitUsage},
		{[]string{"--db", os.DevNull, "runs"}, "not a regular file (it is a character device)", exitFailed},
	} {
		began := time.Now()
		_, stderr, code := c.run(tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("vfleet %v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
		if d := time.Since(began); d > 30*time.Second {
			t.Errorf("vfleet %v took %s to refuse its input", tc.args, d)
		}
	}
	if os.Geteuid() == 0 {
		// As root each command that measures gets as far as the database,
		// which it must refuse without writing a journal beside the device,
		// and before it makes an image in its state directory.
		for _, args := range [][]string{
			{"run", scenario(ok, "{}")},
			{"fleet", "up", scenario(ok, "{}")},
		} {
			state := t.TempDir()
			_, stderr, code := c.run(append([]string{"--state-dir", state, "--db", os.DevNull}, args...)...)
			if code != exitFailed || !strings.Contains(stderr, "not a regular file") {
				t.Errorf("%v --db /dev/null: exit %d, %q", args[:len(args)-1], code, stderr)
			}
			if _, err := os.Stat(filepath.Join(state, "images")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%v --db /dev/null made images in its state directory (%v)", args[:len(args)-1], err)
			}
		}
	}
	if _, err := os.Stat(os.DevNull + "-journal"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s-journal exists", os.DevNull)
	}
}

// TestReadOnlyDatabase: the commands that read work on a database on a
// read-only mount; a run says it needs to write, before it builds anything.
func TestReadOnlyDatabase(t *testing.T) {
	testutil.RequiresRoot(t)
	c := newCLI(t)
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=4m"); err != nil {
		t.Fatalf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	c.db = filepath.Join(dir, "results.db")
	st, err := store.Open(c.db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateRun(context.Background(), &store.Run{ScenarioName: "kept", ScenarioText: []byte("kept"), Baseline: "host"}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	if stdout, stderr, code := c.run("runs"); code != exitOK || !strings.Contains(stdout, "kept") {
		t.Errorf("runs on a read-only database: exit %d\n%s%s", code, stdout, stderr)
	}
	began := time.Now()
	_, stderr, code := c.run("run", c.scenario(reps(1)), "--html", "-")
	if code != exitFailed || !strings.Contains(stderr, "read-only file system") {
		t.Errorf("run on a read-only database: exit %d, %q; want %d saying it is read-only", code, stderr, exitFailed)
	}
	if d := time.Since(began); d > 30*time.Second {
		t.Errorf("the run took %s to refuse a read-only database", d)
	}
}
