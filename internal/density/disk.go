package density

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// DiskUsage returns the bytes a directory tree really occupies on its
// filesystem: the blocks allocated to each file and directory (st_blocks,
// so holes in sparse files cost nothing), every inode once however many
// hard links it has. It does not descend into mount points below dir: a
// guest's overlay is mounted inside its state directory, and walking into
// it would count the whole shared image again. Files removed during the
// walk are left out.
func DiskUsage(dir string) (int64, error) {
	var root unix.Statx_t
	if err := statx(dir, &root); err != nil {
		return 0, fmt.Errorf("disk usage of %s: %w", dir, err)
	}
	type inode struct {
		devMajor, devMinor uint32
		ino                uint64
	}
	linked := map[inode]bool{}
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != dir && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		var st unix.Statx_t
		if err := statx(p, &st); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if p != dir && mountRoot(&st, &root) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil // a file bind-mounted over a file
		}
		if st.Nlink > 1 && !d.IsDir() {
			id := inode{st.Dev_major, st.Dev_minor, st.Ino}
			if linked[id] {
				return nil
			}
			linked[id] = true
		}
		total += int64(st.Blocks) * 512
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("disk usage of %s: %w", dir, err)
	}
	return total, nil
}

func statx(path string, st *unix.Statx_t) error {
	err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW,
		unix.STATX_TYPE|unix.STATX_INO|unix.STATX_NLINK|unix.STATX_BLOCKS, st)
	if err != nil {
		return &fs.PathError{Op: "statx", Path: path, Err: err}
	}
	return nil
}

// mountRoot says whether st is the root of a mount. The kernel says so
// exactly since Linux 5.8, bind mounts of the same filesystem included;
// before, a change of device from dir's is the next best sign.
func mountRoot(st, dir *unix.Statx_t) bool {
	if st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		return st.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0
	}
	return st.Dev_major != dir.Dev_major || st.Dev_minor != dir.Dev_minor
}
