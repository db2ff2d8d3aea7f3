package store

import (
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"modernc.org/sqlite" // also registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/vfleet/vfleet/internal/regfile"
)

var (
	// ErrNotFound is returned for a run that does not exist.
	ErrNotFound = errors.New("not found")
	// ErrSchemaTooNew is returned for a database written by a newer vfleet.
	ErrSchemaTooNew = errors.New("database schema is newer than this vfleet")
	// ErrNotDatabase is returned for a file that is not a vfleet results
	// database: not SQLite at all, or SQLite belonging to another program.
	ErrNotDatabase = errors.New("not a vfleet results database")
	// ErrHashMismatch is returned when a run's scenario hash does not match
	// its scenario text, which would make the recorded provenance a lie.
	ErrHashMismatch = errors.New("scenario hash does not match the scenario text")
	// ErrNoWAL is returned when SQLite cannot put the database in WAL mode,
	// without which a report would block a running benchmark's writes.
	ErrNoWAL = errors.New("database cannot use write-ahead logging")
	// ErrNotRegular is returned for a path that exists but is not a regular
	// file (a device such as /dev/null, a directory, a pipe): SQLite would
	// write its journal beside it.
	ErrNotRegular = regfile.ErrNotRegular
	// ErrReadOnly is returned when a command that writes results is given
	// a database it cannot write.
	ErrReadOnly = errors.New("results database is read-only")
	// ErrDiskFull is returned when the database's file system has no room
	// left, where SQLite cannot even read: reading a database in WAL mode
	// makes its shared-memory index beside it.
	ErrDiskFull = errors.New("no space left for the results database")
	// ErrSchemaTooOld is returned when a database written by an older
	// vfleet is opened read-only and cannot be upgraded.
	ErrSchemaTooOld = errors.New("database schema is older than this vfleet")
)

// busyTimeout bounds how long a statement waits for another process (a
// report reading while a run writes) to release the database.
const busyTimeout = 5 * time.Second

const sqliteMagic = "SQLite format 3\x00"

// Store is an open results database. It is safe for concurrent use.
type Store struct {
	db   *sql.DB
	path string
}

// Open opens the results database at path for reading and writing,
// creating it and its directory if needed, and brings its schema up to
// date. A path that cannot be written fails with ErrReadOnly.
func Open(path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open results database %s: %w", path, err)
	}
	if err := refuseNonRegular(abs); err != nil {
		return nil, fmt.Errorf("open results database %s: %w", abs, err)
	}
	if err := prepareFile(abs); err != nil {
		return nil, fmt.Errorf("open results database %s: %w", abs, err)
	}
	if err := checkWritable(abs); err != nil {
		return nil, fmt.Errorf("open results database %s: %w", abs, err)
	}
	db, err := sql.Open("sqlite", dsn(abs, ""))
	if err != nil {
		return nil, fmt.Errorf("open results database %s: %w", abs, err)
	}
	// Writers from the goroutines of one run queue inside database/sql
	// rather than contending for SQLite's file lock, where the busy timeout
	// could expire under load. Readers lose nothing: every query is short.
	db.SetMaxOpenConns(1)
	s := &Store{db: db, path: abs}
	// Another program's database is refused before the WAL switch, which
	// would rewrite its header.
	if err := s.refuseForeign(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open results database %s: %w", abs, explain(err, abs))
	}
	if err := s.useWAL(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open results database %s: %w", abs, explain(err, abs))
	}
	if err := s.migrate(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open results database %s: %w", abs, explain(err, abs))
	}
	return s, nil
}

// dsn builds a file: URI so that characters such as '?' or '#' in the path
// are escaped instead of being taken for the query. It carries only the
// per-connection settings, which the driver applies to every new
// connection, busy_timeout first so that nothing runs without it. Every
// transaction takes the write lock when it begins (_txlock=immediate): a
// deferred transaction that reads then writes can fail with SQLITE_BUSY
// without waiting, and the migration check must see the version it is
// about to change. The journal mode is not here: see useWAL.
func dsn(abs, mode string) string {
	q := url.Values{}
	switch mode {
	case "ro":
		q.Set("mode", "ro")
	case "immutable":
		q.Set("mode", "ro")
		q.Set("immutable", "1")
	}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	return (&url.URL{Scheme: "file", Path: abs, RawQuery: q.Encode()}).String()
}

// useWAL switches the database to write-ahead logging, so that a report can
// read while a run writes. The mode is stored in the file, so this changes
// something only on the first open of a new database, and that is where two
// processes starting at once collide: the switch reads the header under a
// shared lock and then upgrades to a write lock, and SQLite does not call
// the busy handler for an upgrade (waiting while holding the shared lock
// could deadlock two connections doing the same), so busy_timeout does not
// cover it and one of them fails at once with SQLITE_BUSY. The failed
// statement releases its shared lock, so retrying lets the other finish;
// the retries are bounded by the same busyTimeout. The switch cannot run
// inside BEGIN IMMEDIATE instead: SQLite refuses to change into WAL mode
// within a transaction.
func (s *Store) useWAL() error {
	deadline := time.Now().Add(busyTimeout)
	pause := time.Millisecond
	for {
		var mode string
		err := s.db.QueryRow(`PRAGMA journal_mode = WAL`).Scan(&mode)
		if err == nil {
			if !strings.EqualFold(mode, "wal") {
				return fmt.Errorf("%w: the journal mode stayed %q instead of wal (the filesystem may not support the shared memory WAL needs)",
					ErrNoWAL, mode)
			}
			return nil
		}
		if !isBusy(err) || time.Now().After(deadline) {
			return fmt.Errorf("switch to WAL journal: %w", err)
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// isBusy reports whether err is SQLite's "database is locked", of any
// extended kind.
func isBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

// prepareFile creates the database readable by its owner only (runs
// record host details), and refuses an existing file that is not SQLite
// before the driver touches it, so a mistyped path cannot damage another file.
//
// Closing this descriptor drops every POSIX lock the process holds on the
// file, SQLite's included, so a process should open a given database once
// (vfleet's commands do) rather than open it again while a Store on it is
// live.
func prepareFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		if errors.Is(err, unix.EROFS) || errors.Is(err, unix.EACCES) {
			return fmt.Errorf("%w: %w", ErrReadOnly, err)
		}
		return err
	}
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		if err := create(path); err != nil {
			if werr := checkWritable(path); errors.Is(werr, ErrReadOnly) {
				return werr
			}
			return err
		}
	}
	return checkHeader(path)
}

// create makes a new database, its schema whole, under a name of its own
// beside path and links it into place: a creation that fails (a full disk,
// a file system without the shared memory WAL needs) or is killed leaves
// no empty file that a later command would take for a database. Two
// processes creating the same database at once each make one; the first
// link wins and the other's is removed.
func create(path string) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".new-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	f.Close()
	defer func() {
		for _, name := range Files(tmp) {
			os.Remove(name)
		}
	}()
	db, err := sql.Open("sqlite", dsn(tmp, ""))
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	s := &Store{db: db, path: tmp}
	err = s.useWAL()
	if err == nil {
		err = s.migrate()
	}
	if err != nil {
		db.Close()
		return err
	}
	if err := db.Close(); err != nil {
		return err
	}
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

// Files names the database at path and the files SQLite keeps beside it
// (its write-ahead log, its shared-memory index and a rollback journal):
// what no output file may replace.
func Files(path string) []string {
	return []string{path, path + "-wal", path + "-shm", path + "-journal"}
}

// checkHeader refuses a file that is not SQLite; an empty one is a new
// database.
func checkHeader(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	head := make([]byte, len(sqliteMagic))
	n, err := io.ReadFull(f, head)
	if n == 0 && errors.Is(err, io.EOF) {
		return nil // new or empty: SQLite initialises it
	}
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return err
	}
	if string(head[:n]) != sqliteMagic {
		return fmt.Errorf("%w: the file is not SQLite, refusing to touch it", ErrNotDatabase)
	}
	return nil
}

// OpenReadOnly opens an existing results database for reading only, for
// the commands that only read (runs, report, compare, serve): they work on
// a database its user may not write, and cannot damage one. On a read-only
// file system, where SQLite cannot create the shared-memory index of its
// write-ahead log, the file is opened as immutable: nothing can change it
// there. A database of an older schema is upgraded first where it can be
// written, and refused with ErrSchemaTooOld where it cannot.
func OpenReadOnly(path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open results database %s: %w", path, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("open results database %s: %w", abs, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("open results database %s: %w (it is %s)", abs, ErrNotRegular, regfile.Kind(fi.Mode()))
	}
	if err := checkHeader(abs); err != nil {
		return nil, fmt.Errorf("open results database %s: %w", abs, err)
	}
	mode := "ro"
	if errors.Is(unix.Access(filepath.Dir(abs), unix.W_OK), unix.EROFS) {
		mode = "immutable"
	}
	s, err := openReadOnly(abs, mode)
	if !errors.Is(err, ErrSchemaTooOld) || checkWritable(abs) != nil {
		return s, err
	}
	upgraded, err := Open(abs)
	if err != nil {
		return nil, err
	}
	upgraded.Close()
	return openReadOnly(abs, mode)
}

func openReadOnly(abs, mode string) (*Store, error) {
	db, err := sql.Open("sqlite", dsn(abs, mode))
	if err != nil {
		return nil, fmt.Errorf("open results database %s: %w", abs, err)
	}
	db.SetMaxOpenConns(1)
	s := &Store{db: db, path: abs}
	if err := s.checkSchema(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open results database %s: %w", abs, explain(err, abs))
	}
	return s, nil
}

// refuseNonRegular fails for a path that exists and is not a regular file.
func refuseNonRegular(path string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w (it is %s): give a regular file, or a new path in a directory", ErrNotRegular, regfile.Kind(fi.Mode()))
	}
	return nil
}

// explain says what SQLite's err means when the database's file system
// is full (SQLite says "disk I/O error" when it cannot make its index of
// the write-ahead log) or the database cannot be written.
func explain(err error, path string) error {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	dir := filepath.Dir(path)
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_FULL:
		return fmt.Errorf("%w on %s (free some space): %w", ErrDiskFull, dir, err)
	case sqlite3.SQLITE_IOERR:
		var st unix.Statfs_t
		if unix.Statfs(dir, &st) == nil && st.Bavail == 0 {
			return fmt.Errorf("%w on %s (free some space): %w", ErrDiskFull, dir, err)
		}
	case sqlite3.SQLITE_READONLY:
		return fmt.Errorf("%w: %w", ErrReadOnly, err)
	}
	return err
}

// checkWritable fails with ErrReadOnly when this process cannot write the
// database or, since SQLite keeps its journal beside it, its directory.
// access(2) answers for the real user, as the kernel would for root: a
// read-only mount refuses root too.
func checkWritable(path string) error {
	for _, p := range []string{path, filepath.Dir(path)} {
		err := unix.Access(p, unix.W_OK)
		if errors.Is(err, unix.ENOENT) && p == path {
			continue // a new database: its directory decides
		}
		if err != nil {
			why := "no write permission"
			if errors.Is(err, unix.EROFS) {
				why = "read-only file system"
			}
			return fmt.Errorf("%w: %s on %s (pass a database this process can write with --db)", ErrReadOnly, why, p)
		}
	}
	return nil
}

// Close closes the database. Closing twice is harmless.
func (s *Store) Close() error { return s.db.Close() }

// toNS and fromNS store times as Unix nanoseconds with 0 meaning "not set",
// so a zero time.Time (a run still running) survives the round trip.
func toNS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNS(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}
