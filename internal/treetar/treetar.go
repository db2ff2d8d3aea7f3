// Package treetar writes a directory tree as a tar stream, as a root file
// system must travel.
package treetar

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Write writes the named entries of dir (files, and directories with all
// they hold) as a tar stream to w, for another machine or an image layer
// to unpack as a root file system: owners by number only (names are this
// machine's), hard links as links (not the bytes twice), symbolic links
// as links, and no sockets, which are a live process's, never content.
func Write(w io.Writer, dir string, names []string) error {
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
