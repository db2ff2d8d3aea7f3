package ledger

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestJournalKeepsPendingNewestFirstAndIgnoresTornTail(t *testing.T) {
	journal := `{"op":"add","seq":1,"kind":"dir","id":"/a"}
{"op":"add","seq":2,"kind":"mount","id":"/a/m"}
{"op":"add","seq":3,"kind":"process","id":"42"}
{"op":"done","seq":2}
{"op":"add","seq":4,"kind":"di`
	got, err := ReadJournal([]byte(journal))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range got {
		ids = append(ids, e.ID)
	}
	if strings.Join(ids, ",") != "42,/a" {
		t.Fatalf("pending = %v, want [42 /a]", ids)
	}
}

func TestJournalRejectsCorruptionInTheMiddle(t *testing.T) {
	journal := "{\"op\":\"add\",\"seq\":1,\"kind\":\"dir\",\"id\":\"/a\"}\ngarbage\n{\"op\":\"done\",\"seq\":1}\n"
	if _, err := ReadJournal([]byte(journal)); err == nil {
		t.Fatal("a corrupt line that is not the last must be an error")
	}
}

func TestRecordDoneClose(t *testing.T) {
	root := t.TempDir()
	l, err := Create(root, "run1")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := l.Record(KindDir, "/x", nil)
	b, _ := l.Record(KindDir, "/y", map[string]string{"k": "v"})
	if err := l.Done(a); err != nil {
		t.Fatal(err)
	}
	if p := l.Pending(); len(p) != 1 || p[0].ID != "/y" || p[0].Data["k"] != "v" {
		t.Fatalf("pending = %+v", p)
	}
	data, _ := os.ReadFile(filepath.Join(l.Dir(), journalName))
	fromDisk, err := ReadJournal(data)
	if err != nil || len(fromDisk) != 1 || fromDisk[0].Seq != b.Seq {
		t.Fatalf("journal on disk = %+v, %v", fromDisk, err)
	}
	l.Done(b)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(l.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("an empty ledger must be removed on close")
	}
	if _, err := l.Record(KindDir, "/z", nil); err == nil {
		t.Fatal("record after close must fail")
	}
}

// TestCleanUndoesOrphanedLedger simulates a vfleet that died: a ledger whose
// owner process is gone, holding a directory and a live process.
func TestCleanUndoesOrphanedLedger(t *testing.T) {
	root := t.TempDir()
	victim := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(filepath.Join(victim, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { sleeper.Wait(); close(exited) }()
	t.Cleanup(func() { sleeper.Process.Kill() })

	l, err := Create(root, "dead")
	if err != nil {
		t.Fatal(err)
	}
	l.Record(KindDir, victim, nil)
	if _, err := l.RecordProcess(sleeper.Process.Pid); err != nil {
		t.Fatal(err)
	}
	l.f.Close() // the owner "dies" without closing cleanly
	l.f = nil

	// While the owner (this process) lives, a plain clean leaves it alone.
	removed, err := Clean(context.Background(), root, CleanOptions{})
	if err != nil || len(removed) != 0 {
		t.Fatalf("clean touched a live run: %v %v", removed, err)
	}
	// Rewrite the owner as a pid that is certainly not running.
	os.WriteFile(filepath.Join(root, "dead", ownerName), []byte(`{"pid":`+strconv.Itoa(1<<22+1)+`,"start_time":1}`), 0o600)

	var seen []string
	removed, err = Clean(context.Background(), root, CleanOptions{Progress: func(r Removed) { seen = append(seen, r.Entry.Describe()) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 2 || !strings.HasPrefix(seen[0], "process ") || !strings.HasPrefix(seen[1], "dir ") {
		t.Fatalf("removed newest first? got %v", seen)
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatal("recorded process still running after clean")
	}
	if _, err := os.Stat(victim); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("recorded directory still there after clean")
	}
	if _, err := os.Stat(filepath.Join(root, "dead")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("ledger not removed after a complete clean")
	}
}

func TestCleanKeepsWhatFailedForARetry(t *testing.T) {
	root := t.TempDir()
	l, _ := Create(root, "r")
	l.Record("no-such-kind", "thing", nil)
	l.Record(KindDir, filepath.Join(t.TempDir(), "gone"), nil)
	l.f.Close()
	l.f = nil
	removed, err := Clean(context.Background(), root, CleanOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 2 || removed[1].Err == nil || removed[0].Err != nil {
		t.Fatalf("removed = %+v", removed)
	}
	data, _ := os.ReadFile(filepath.Join(root, "r", journalName))
	left, err := ReadJournal(data)
	if err != nil || len(left) != 1 || left[0].Kind != "no-such-kind" {
		t.Fatalf("journal after partial clean = %+v, %v", left, err)
	}
}

// A ledger made where its state directory does not exist yet leaves that
// directory reachable by others (an unprivileged guest's root reads its
// image under it); only the ledger itself is private.
func TestCreateMakesOnlyTheLedgerPrivate(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	l, err := Create(filepath.Join(state, "ledgers"), "r")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for dir, want := range map[string]os.FileMode{state: 0o755, filepath.Join(state, "ledgers"): 0o755, l.Dir(): 0o700} {
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got&0o711 != want&0o711 {
			t.Errorf("%s: mode %v, want %v", dir, got, want)
		}
	}
}

// undone logs the entries of kind "test-log" as Clean undoes them; an entry
// of kind "test-meet" waits (a few seconds at most) until every other one
// has begun, which only entries undone side by side can do.
var (
	undoneMu sync.Mutex
	undone   []string
	meeting  sync.WaitGroup
)

func init() {
	RegisterUndo("test-log", func(_ context.Context, e Entry) error {
		undoneMu.Lock()
		defer undoneMu.Unlock()
		undone = append(undone, e.ID)
		return nil
	})
	RegisterUndo("test-meet", func(_ context.Context, e Entry) error {
		meeting.Done()
		met := make(chan struct{})
		go func() { meeting.Wait(); close(met) }()
		select {
		case <-met:
			return nil
		case <-time.After(5 * time.Second):
			return errors.New("undone alone")
		}
	})
}

// A fleet's guests are undone side by side, each one's entries newest
// first, and the run's own entries in their place: what the run made
// after the guests goes before any of them, what it made before after.
func TestCleanUndoesScopesSideBySide(t *testing.T) {
	root := t.TempDir()
	l, err := Create(root, "fleet")
	if err != nil {
		t.Fatal(err)
	}
	l.Record("test-log", "run-first", nil)
	guests := []string{"g1", "g2", "g3"}
	meeting.Add(len(guests))
	for step := range 2 {
		for _, g := range guests {
			kind := "test-log"
			if step == 1 {
				kind = "test-meet"
			}
			l.Scoped(g).Record(kind, g+"-"+strconv.Itoa(step), nil)
		}
	}
	l.Record("test-log", "run-last", nil)
	l.f.Close()
	l.f = nil
	undone = nil
	removed, err := Clean(context.Background(), root, CleanOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range removed {
		if r.Err != nil {
			t.Errorf("%s: %v (the guests' entries were not undone side by side)", r.Entry.Describe(), r.Err)
		}
	}
	// Each guest's step 1 (meet) was undone before its step 0 (log), and
	// the three logs came between the run's two.
	if len(undone) != 5 || undone[0] != "run-last" || undone[4] != "run-first" {
		t.Fatalf("undone in the order %v, want run-last, the guests', run-first", undone)
	}
	if got := removed[0].Entry.ID; got != "run-last" {
		t.Errorf("results in the order %s first, want the ledger's (newest first)", got)
	}
}

// A scoped view records into the same journal: a run sees its guests'
// pending entries, and a guest's release marks its own done.
func TestScopedRecordsIntoTheRunsJournal(t *testing.T) {
	l, err := Create(t.TempDir(), "r")
	if err != nil {
		t.Fatal(err)
	}
	g := l.Scoped("g1")
	e, err := g.Record(KindDir, filepath.Join(t.TempDir(), "x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := l.Pending(); len(p) != 1 || p[0].Scope != "g1" {
		t.Fatalf("the run's pending = %+v, want the guest's entry", p)
	}
	if err := g.Release(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(l.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a ledger whose scoped entries are done must be removed on close")
	}
}
