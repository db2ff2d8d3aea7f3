package remote

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"syscall"
)

// Push copies the named entries of the local directory dir (files, and
// directories with all they hold) into the directory to on the peer,
// which it makes: one tar stream through a session's standard input into
// the peer's tar, so nothing but tar is needed there. Owners go by
// number, as a root file system needs, and hard links stay links.
func (m *Machine) Push(ctx context.Context, dir string, names []string, to string) error {
	pr, pw := io.Pipe()
	written := make(chan error, 1)
	go func() {
		err := writeTree(pw, dir, names)
		pw.CloseWithError(err)
		written <- err
	}()
	_, err := m.sh(ctx, pr, `mkdir -p "$1" && tar -xpf - -C "$1"`, to)
	// A peer's tar that gave up reads no more: the writer must stop too.
	pr.CloseWithError(io.ErrClosedPipe)
	if werr := <-written; werr != nil && !errors.Is(werr, io.ErrClosedPipe) {
		err = errors.Join(err, werr)
	}
	if err != nil {
		return fmt.Errorf("push %s to %s: %w", dir, m.Target, err)
	}
	return nil
}

// writeTree writes the named entries of dir as a tar stream to w.
func writeTree(w io.Writer, dir string, names []string) error {
	tw := tar.NewWriter(w)
	type inode struct{ dev, ino uint64 }
	linked := map[inode]string{}
	for _, name := range names {
		err := filepath.WalkDir(filepath.Join(dir, name), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if fi.Mode().Type() == fs.ModeSocket {
				// A socket is a live process's, never content.
				return nil
			}
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			var target string
			if fi.Mode().Type() == fs.ModeSymlink {
				if target, err = os.Readlink(p); err != nil {
					return err
				}
			}
			h, err := tar.FileInfoHeader(fi, target)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			h.Name = filepath.ToSlash(rel)
			if fi.IsDir() {
				h.Name += "/"
			}
			// Names are this machine's: the peer must take the numbers.
			h.Uname, h.Gname = "", ""
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && fi.Mode().IsRegular() && st.Nlink > 1 {
				key := inode{uint64(st.Dev), st.Ino}
				if first, ok := linked[key]; ok {
					h.Typeflag, h.Linkname, h.Size = tar.TypeLink, first, 0
				} else {
					linked[key] = h.Name
				}
			}
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if h.Typeflag != tar.TypeReg || h.Size == 0 {
				return nil
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(tw, f)
			return err
		})
		if err != nil {
			return err
		}
	}
	return tw.Close()
}
