package store

import (
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
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

// Open opens the results database at path, creating it and its directory
// if needed, and brings its schema up to date.
func Open(path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open results database %s: %w", path, err)
	}
	if err := prepareFile(abs); err != nil {
		return nil, fmt.Errorf("open results database %s: %w", abs, err)
	}
	db, err := sql.Open("sqlite", dsn(abs))
	if err != nil {
		return nil, fmt.Errorf("open results database %s: %w", abs, err)
	}
	// Writers from the goroutines of one run queue inside database/sql
	// rather than contending for SQLite's file lock, where the busy timeout
	// could expire under load. Readers lose nothing: every query is short.
	db.SetMaxOpenConns(1)
	s := &Store{db: db, path: abs}
	if err := s.migrate(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open results database %s: %w", abs, err)
	}
	return s, nil
}

// dsn builds a file: URI so that characters such as '?' or '#' in the path
// are escaped instead of being taken for the query. Every transaction takes
// the write lock when it begins (_txlock=immediate): a deferred transaction
// that reads then writes can fail with SQLITE_BUSY without waiting, and the
// migration check must see the version it is about to change.
func dsn(abs string) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Set("_txlock", "immediate")
	return (&url.URL{Scheme: "file", Path: abs, RawQuery: q.Encode()}).String()
}

// prepareFile creates the database file readable by its owner only (runs
// record host details), and refuses an existing file that is not SQLite
// before the driver touches it, so a mistyped path cannot damage another file.
func prepareFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o600)
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
