package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/regfile"
	"github.com/vfleet/vfleet/internal/store"
)

// writeOutput hands write the file output names, or standard output for
// "" and "-". A file is replaced whole or not at all (regfile.Replace): a
// report that fails midway leaves no file, or the one there before. What
// is not a regular file (a device, a named pipe, a link to either) and the
// results database, by any name, are refused before anything is written:
// a stream goes to "-" and a shell's redirection.
func (g *globalOptions) writeOutput(output string, write func(io.Writer) error) error {
	if output == "" || output == "-" {
		return write(os.Stdout)
	}
	err := regfile.Replace(output, 0o666, store.Files(g.db()), write)
	switch {
	case errors.Is(err, regfile.ErrProtected):
		return usageError{fmt.Errorf("%w, the results database", err)}
	case errors.Is(err, regfile.ErrNotRegular):
		return usageError{err}
	}
	return err
}

// checkOutputPath fails when a file a flag names could not be written: the
// results database, what is not a regular file, a directory that is
// missing or read-only, one where no file can be created (/proc).
func (g *globalOptions) checkOutputPath(flag, path string) error {
	if path == "-" {
		return nil
	}
	dir := "."
	if path != "" {
		if err := regfile.CheckReplace(path, store.Files(g.db())); err != nil {
			return fmt.Errorf("%s: %w", flag, err)
		}
		dir = filepath.Dir(path)
	}
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("%s %s: no directory %s to write it in", flag, path, dir)
	}
	if err := unix.Access(dir, unix.W_OK); err != nil {
		return fmt.Errorf("%s %s: cannot write in %s: %w", flag, cmp.Or(path, "(default)"), dir, err)
	}
	if path == "" {
		return nil
	}
	// Root may write in any directory by its mode, yet not create a file
	// in every one: only creating one, as the writer will beside path,
	// tells.
	f, err := os.CreateTemp(dir, ".vfleet-trial-*")
	if err != nil {
		return fmt.Errorf("%s %s: cannot create it: %w", flag, path, err)
	}
	f.Close()
	if err := os.Remove(f.Name()); err != nil {
		return fmt.Errorf("%s %s: remove the trial file: %w", flag, path, err)
	}
	return nil
}
