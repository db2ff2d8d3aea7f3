// Package regfile opens, checks and copies files that must be regular
// files of a bounded size: what a user names as a scenario, a kernel, an
// initrd or a database. A directory, a device such as /dev/zero or a named
// pipe is refused by name before it is read, instead of blocking or never
// ending. It is also the one writer of files replaced whole (Replace): a
// command's output, the ledger's journal, a state file; what is not a
// regular file, or is a file the caller keeps, is never written over.
package regfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

var (
	// ErrNotRegular is matched by the refusal of a directory, a device, a
	// named pipe or a socket where a file is expected.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge is matched by the refusal of a file over its bound.
	ErrTooLarge = errors.New("too large")
)

// Kind names what a file that is not a regular file is.
func Kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "a special file"
}

// Open opens path for reading only if it is a regular file. It is
// looked at before it is opened, and opened without blocking (a named
// pipe would otherwise wait for a writer forever); what was opened is
// looked at again, in case the path changed meanwhile.
func Open(path string) (*os.File, fs.FileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s is %s, %w", path, Kind(fi.Mode()), ErrNotRegular)
	}
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	if fi, err = f.Stat(); err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is %s, %w", path, Kind(fi.Mode()), ErrNotRegular)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// Check says whether path is a regular file of at most max bytes.
func Check(path string, max int64) error {
	f, fi, err := Open(path)
	if err != nil {
		return err
	}
	f.Close()
	return checkSize(path, fi.Size(), max)
}

// Copy copies the regular file at path, of at most max bytes, to w.
// The bound holds on what is read, so a file growing meanwhile cannot get
// past it either.
func Copy(w io.Writer, path string, max int64) (int64, error) {
	f, fi, err := Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := checkSize(path, fi.Size(), max); err != nil {
		return 0, err
	}
	n, err := io.Copy(w, io.LimitReader(f, max+1))
	if err != nil {
		return n, fmt.Errorf("%s: %w", path, err)
	}
	return n, checkSize(path, n, max)
}

// CopyFile copies the regular file src, of at most max bytes, to dst,
// created with mode.
func CopyFile(src, dst string, mode os.FileMode, max int64) error {
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := Copy(out, src, max); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func checkSize(path string, size, max int64) error {
	if size > max {
		return fmt.Errorf("%s is %w: %d bytes, and at most %s are allowed", path, ErrTooLarge, size, Bytes(max))
	}
	return nil
}

// Bytes says a bound in the unit it is a whole number of.
func Bytes(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
