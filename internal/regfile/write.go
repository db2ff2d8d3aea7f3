package regfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// ErrProtected is matched by the refusal to write over a file the caller
// must keep, such as the results database, whatever name it is given.
var ErrProtected = errors.New("refusing to write over a file that must be kept")

// CheckReplace says whether Replace may put a file at path: a new path, or
// a regular file that is none of keep. A symbolic link is judged by what it
// names, so a link to /dev/null is a character device. Only the path is
// looked at: whether its directory takes a new file is known by creating
// one.
func CheckReplace(path string, keep []string) error {
	_, err := existing(path, keep)
	return err
}

// existing is what CheckReplace says, and what path is when it exists
// already (nil when it does not).
func existing(path string, keep []string) (fs.FileInfo, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is %s, %w: give a regular file or a new path", path, Kind(fi.Mode()), ErrNotRegular)
	}
	for _, k := range keep {
		// The inode decides, not the name: another spelling of the path, a
		// hard link or a symbolic link reaches the same file.
		if ki, err := os.Stat(k); err == nil && os.SameFile(fi, ki) {
			return nil, fmt.Errorf("%s: %w: it is %s", path, ErrProtected, k)
		}
	}
	return fi, nil
}

// Replace writes path whole or not at all. What write produces goes into a
// new file beside path, is synced, and is renamed over path only once
// write has returned without an error; the directory is synced after. A
// failure at any step, write's own included, leaves path as it was and no
// other file behind. What CheckReplace refuses is refused before write is
// called; a symbolic link is followed, so the file it names is replaced. A
// new file gets perm less the umask; a replaced one keeps its permissions.
func Replace(path string, perm fs.FileMode, keep []string, write func(io.Writer) error) error {
	if _, err := existing(path, keep); err != nil {
		return err
	}
	target := path
	if real, err := filepath.EvalSymlinks(path); err == nil {
		target = real
	}
	f, err := createBeside(target, perm)
	if err != nil {
		return err
	}
	renamed := false
	defer func() {
		if !renamed {
			os.Remove(f.Name())
		}
	}()
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	// Looked at again: what the path names may have changed while write
	// ran, and the rename would replace whatever it is.
	old, err := existing(target, keep)
	if err != nil {
		return err
	}
	if old != nil {
		if err := os.Chmod(f.Name(), old.Mode().Perm()); err != nil {
			return err
		}
	}
	if err := os.Rename(f.Name(), target); err != nil {
		return err
	}
	renamed = true
	return syncDir(filepath.Dir(target))
}

// WriteFile is Replace of data.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return Replace(path, perm, nil, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// createBeside creates a new file of a name of its own in path's
// directory, hidden, with perm less the umask: os.CreateTemp's 0600 would
// leave an export readable by its writer only.
func createBeside(path string, perm fs.FileMode) (*os.File, error) {
	for range 100 {
		name := filepath.Join(filepath.Dir(path), fmt.Sprintf(".%s.%016x", filepath.Base(path), rand.Uint64()))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		var pe *fs.PathError
		switch {
		case errors.Is(err, fs.ErrExist):
			continue
		case errors.As(err, &pe):
			// Named as the file asked for: the temporary name means
			// nothing to whoever reads the error.
			return nil, &fs.PathError{Op: "create", Path: path, Err: pe.Err}
		}
		return f, err
	}
	return nil, fmt.Errorf("create a file beside %s: every name tried exists", path)
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
