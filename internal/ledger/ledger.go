// Package ledger records every resource a run creates before it creates it,
// so that whatever a killed vfleet leaves behind can be found and removed.
//
// A ledger is one directory per run holding an owner file (pid and process
// start time of the vfleet that owns it) and an append-only journal of JSON
// lines: an "add" line is written and synced before a resource is created,
// a "done" line after it has been removed. A torn last line (a crash during
// the write) is ignored. Clean walks the ledgers whose owner is gone and
// undoes their pending entries newest first, through undo functions that
// the packages creating each kind of resource register. Entries recorded in
// a scope (one guest's, through Scoped) depend only on older entries of
// their scope and on the unscoped ones: Clean undoes different scopes side
// by side, which is what makes taking down a fleet of a thousand guests a
// matter of seconds.
package ledger

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/vfleet/vfleet/internal/procfs"
	"github.com/vfleet/vfleet/internal/regfile"
)

const (
	journalName = "journal.jsonl"
	ownerName   = "owner.json"
)

// Entry is one recorded resource.
type Entry struct {
	Seq  int               `json:"seq"`
	Kind string            `json:"kind"` // selects the undo function
	ID   string            `json:"id"`   // what to remove: a path, a container id, a pid
	Data map[string]string `json:"data,omitempty"`
	// Scope is the guest the resource belongs to, "" for the run's own.
	Scope string `json:"scope,omitempty"`
}

// Describe is how the entry is shown to users ("mount /var/lib/...").
func (e Entry) Describe() string { return e.Kind + " " + e.ID }

type line struct {
	Op string `json:"op"` // "add" or "done"
	Entry
}

type owner struct {
	procfs.Process        // its start time keeps a reused pid from passing for the owner
	Created        string `json:"created"`
}

// Ledger is the open journal of one run, or a view of it that records in
// one scope. It is safe for concurrent use.
type Ledger struct {
	*journal
	scope string
}

type journal struct {
	dir string

	mu   sync.Mutex
	f    *os.File
	seq  int
	open map[int]Entry
}

// Scoped is a view of the ledger whose entries belong to scope (a guest's
// name). What is recorded through it must be the scope's own, needed by
// nothing recorded in another scope: a resource guests share is recorded
// through the run's ledger.
func (l *Ledger) Scoped(scope string) *Ledger { return &Ledger{journal: l.journal, scope: scope} }

// Create makes a new ledger for runID under root, owned by this process.
func Create(root, runID string) (*Ledger, error) {
	dir := filepath.Join(root, runID)
	// Only the ledger is private: root and the directories above it, made
	// here when missing, are a state directory whose images unprivileged
	// guests (a user namespace's root) must be able to reach.
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("create ledger: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("create ledger: %w", err)
	}
	self, err := procfs.Self()
	if err != nil {
		return nil, fmt.Errorf("create ledger: %w", err)
	}
	ob, _ := json.Marshal(owner{Process: self, Created: time.Now().UTC().Format(time.RFC3339)})
	if err := regfile.WriteFile(filepath.Join(dir, ownerName), ob, 0o600); err != nil {
		return nil, fmt.Errorf("create ledger: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, journalName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create ledger: %w", err)
	}
	return &Ledger{journal: &journal{dir: dir, f: f, open: map[int]Entry{}}}, nil
}

// Dir is the ledger's directory.
func (l *Ledger) Dir() string { return l.dir }

// Record writes an entry to stable storage. Call it before creating the
// resource: an entry whose resource never came to exist is harmless, since
// every undo function treats "already gone" as success.
func (l *Ledger) Record(kind, id string, data map[string]string) (Entry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return Entry{}, errors.New("ledger is closed")
	}
	l.seq++
	e := Entry{Seq: l.seq, Kind: kind, ID: id, Data: data, Scope: l.scope}
	if err := l.appendLocked(line{Op: "add", Entry: e}); err != nil {
		return Entry{}, err
	}
	l.open[e.Seq] = e
	return e, nil
}

// Done marks an entry's resource as removed.
func (l *Ledger) Done(e Entry) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return errors.New("ledger is closed")
	}
	if _, ok := l.open[e.Seq]; !ok {
		return nil
	}
	if err := l.appendLocked(line{Op: "done", Entry: Entry{Seq: e.Seq}}); err != nil {
		return err
	}
	delete(l.open, e.Seq)
	return nil
}

// Pending lists the entries not yet marked done, newest first, of every
// scope.
func (l *Ledger) Pending() []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return sortedNewestFirst(l.open)
}

// Close closes the journal. When nothing is pending the ledger directory is
// removed, since there is nothing left to clean.
func (l *Ledger) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	if len(l.open) == 0 && err == nil {
		err = os.RemoveAll(l.dir)
	}
	return err
}

func (l *Ledger) appendLocked(ln line) error {
	b, err := json.Marshal(ln)
	if err != nil {
		return err
	}
	if _, err := l.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write ledger: %w", err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("sync ledger: %w", err)
	}
	return nil
}

// ReadJournal parses a journal and returns the entries not marked done,
// newest first. A torn last line is ignored.
func ReadJournal(data []byte) ([]Entry, error) {
	open := map[int]Entry{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	lineNo := 0
	for sc.Scan() {
		lineNo++
		var ln line
		if err := json.Unmarshal(sc.Bytes(), &ln); err != nil {
			if !bytes.HasSuffix(data, []byte("\n")) && !hasMoreLines(sc) {
				break // torn last write
			}
			return nil, fmt.Errorf("journal line %d: %w", lineNo, err)
		}
		switch ln.Op {
		case "add":
			open[ln.Seq] = ln.Entry
		case "done":
			delete(open, ln.Seq)
		default:
			return nil, fmt.Errorf("journal line %d: unknown op %q", lineNo, ln.Op)
		}
	}
	return sortedNewestFirst(open), sc.Err()
}

func hasMoreLines(sc *bufio.Scanner) bool { return sc.Scan() }

func sortedNewestFirst(m map[int]Entry) []Entry {
	out := make([]Entry, 0, len(m))
	for _, e := range m {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq > out[j].Seq })
	return out
}

// UndoFunc removes the resource an entry describes. It must succeed when the
// resource is already gone, and must not block past ctx.
type UndoFunc func(ctx context.Context, e Entry) error

var (
	undoMu sync.RWMutex
	undos  = map[string]UndoFunc{}
)

// RegisterUndo sets the undo function for a kind of entry; packages that
// create resources call it from init().
func RegisterUndo(kind string, fn UndoFunc) {
	undoMu.Lock()
	defer undoMu.Unlock()
	if _, dup := undos[kind]; dup {
		panic("ledger undo registered twice: " + kind)
	}
	undos[kind] = fn
}

// Undo removes one entry's resource through its kind's undo function.
func Undo(ctx context.Context, e Entry) error {
	undoMu.RLock()
	fn, ok := undos[e.Kind]
	undoMu.RUnlock()
	if !ok {
		return fmt.Errorf("no undo for ledger entry kind %q", e.Kind)
	}
	return fn(ctx, e)
}

// Removed is one resource Clean removed, or failed to.
type Removed struct {
	Run   string
	Entry Entry
	Err   error
}

// CleanOptions tune Clean.
type CleanOptions struct {
	// Force cleans ledgers whose owner is still alive too.
	Force bool
	// Progress, when set, is called for every entry as it is handled.
	Progress func(Removed)
}

// Clean undoes the pending entries of every ledger under root whose owner
// process is gone, newest first, and removes each ledger that ends empty.
// Ledgers of live runs are left alone unless opts.Force is set.
func Clean(ctx context.Context, root string, opts CleanOptions) ([]Removed, error) {
	runs, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read ledgers: %w", err)
	}
	var all []Removed
	var errs []error
	for _, r := range runs {
		if !r.IsDir() {
			continue
		}
		removed, err := CleanRun(ctx, root, r.Name(), opts)
		if errors.Is(err, ErrOwnerAlive) {
			continue
		}
		all = append(all, removed...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return all, errors.Join(errs...)
}

// ErrOwnerAlive says a run's ledger belongs to a vfleet process that is
// still running: its resources are in use.
var ErrOwnerAlive = errors.New("the run's vfleet process is still running")

// CleanRun is Clean for the one ledger of run under root (a run that has
// none has nothing to undo). A ledger whose owner is alive is refused with
// ErrOwnerAlive unless opts.Force is set.
func CleanRun(ctx context.Context, root, run string, opts CleanOptions) ([]Removed, error) {
	dir := filepath.Join(root, run)
	if !opts.Force && ownerAlive(dir) {
		return nil, fmt.Errorf("run %s: %w", run, ErrOwnerAlive)
	}
	removed, err := cleanOne(ctx, dir, run, opts.Progress)
	if err != nil {
		return removed, fmt.Errorf("run %s: %w", run, err)
	}
	return removed, nil
}

func cleanOne(ctx context.Context, dir, run string, progress func(Removed)) ([]Removed, error) {
	data, err := os.ReadFile(filepath.Join(dir, journalName))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	pending, err := ReadJournal(data)
	if err != nil {
		return nil, err
	}
	out := undoAll(ctx, run, pending, progress)
	failed := 0
	for _, r := range out {
		if r.Err != nil {
			failed++
		}
	}
	if failed > 0 {
		// Keep the ledger so a later clean can retry what failed; rewrite it to
		// hold only those entries.
		return out, rewriteJournal(dir, out)
	}
	return out, os.RemoveAll(dir)
}

// undoConcurrency bounds how many scopes are undone at once. An undo
// mostly runs a runtime's binary and waits for processes to die: 1 000
// containers went down in 19.3 s four at a time on 2 cores and 16.9 s
// eight at a time.
var undoConcurrency = max(8, 4*runtime.NumCPU())

// undoAll undoes pending (newest first) in their order, but for the
// entries of different scopes between two unscoped ones, which it undoes
// side by side, each scope's newest first. It returns the results in
// pending's order and calls progress, if set, for each, one at a time.
func undoAll(ctx context.Context, run string, pending []Entry, progress func(Removed)) []Removed {
	out := make([]Removed, len(pending))
	var mu sync.Mutex
	undo := func(i int) {
		r := Removed{Run: run, Entry: pending[i], Err: Undo(ctx, pending[i])}
		mu.Lock()
		defer mu.Unlock()
		out[i] = r
		if progress != nil {
			progress(r)
		}
	}
	for i := 0; i < len(pending); {
		if pending[i].Scope == "" {
			undo(i)
			i++
			continue
		}
		var order []string
		scopes := map[string][]int{}
		for ; i < len(pending) && pending[i].Scope != ""; i++ {
			s := pending[i].Scope
			if _, ok := scopes[s]; !ok {
				order = append(order, s)
			}
			scopes[s] = append(scopes[s], i)
		}
		sem := make(chan struct{}, undoConcurrency)
		var wg sync.WaitGroup
		for _, s := range order {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				for _, k := range scopes[s] {
					undo(k)
				}
			}()
		}
		wg.Wait()
	}
	return out
}

func rewriteJournal(dir string, results []Removed) error {
	var buf bytes.Buffer
	for i := len(results) - 1; i >= 0; i-- {
		if results[i].Err == nil {
			continue
		}
		b, _ := json.Marshal(line{Op: "add", Entry: results[i].Entry})
		buf.Write(append(b, '\n'))
	}
	return regfile.WriteFile(filepath.Join(dir, journalName), buf.Bytes(), 0o600)
}

func ownerAlive(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, ownerName))
	if err != nil {
		return false
	}
	var o owner
	if json.Unmarshal(b, &o) != nil {
		return false
	}
	return o.Alive()
}

// Release removes an entry's resource through its undo function and marks
// it done: the normal way for a live object to tear down what it recorded.
func (l *Ledger) Release(ctx context.Context, e Entry) error {
	if err := Undo(ctx, e); err != nil {
		return err
	}
	return l.Done(e)
}
