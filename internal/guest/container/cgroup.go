package container

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/ledger"
)

// kindCgroup is the ledger entry of a container's cgroup; ID is the
// cgroupsPath, the same below every mounted hierarchy.
const kindCgroup = "cgroup"

// cgroupParent is where every vfleet cgroup lives.
const cgroupParent = "/vfleet"

func init() { ledger.RegisterUndo(kindCgroup, undoCgroup) }

// CgroupMounts lists the mount points of the cgroup hierarchies (v1 and v2)
// in a /proc/self/mountinfo text.
func CgroupMounts(mountinfo io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(mountinfo)
	for sc.Scan() {
		// Fields: id parent major:minor root mountpoint options [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 1 {
			continue
		}
		if qf[0] == "cgroup" || qf[0] == "cgroup2" {
			out = append(out, unescapeMountPath(pf[4]))
		}
	}
	return out, sc.Err()
}

// unescapeMountPath undoes mountinfo's octal escapes of space, tab, newline
// and backslash.
func unescapeMountPath(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// undoCgroup removes a cgroup directory in every hierarchy, then its parents
// up to (and including) /vfleet when they are empty. The runtime normally
// removes the leaf itself; this catches what a killed run left.
func undoCgroup(_ context.Context, e ledger.Entry) error { return undoCgroupPath(e.ID) }

func undoCgroupPath(cgroupsPath string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	mounts, err := CgroupMounts(f)
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range mounts {
		for p := path.Clean(cgroupsPath); p != "/" && p != "."; p = path.Dir(p) {
			err := rmdirCgroup(filepath.Join(m, p), p == path.Clean(cgroupsPath))
			if err == nil || errors.Is(err, unix.ENOENT) {
				continue
			}
			if p != path.Clean(cgroupsPath) && (errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EBUSY)) {
				break // a parent still shared with another run's cgroups
			}
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", filepath.Join(m, p), err))
			break
		}
	}
	return errors.Join(errs...)
}

// cgroupBusyWait bounds how long removing a container's own cgroup waits
// for its last task to be gone: a container killed while starting (Ctrl-C
// during a launch) leaves the runtime's init dying in it for a moment,
// and the cgroup refuses removal (EBUSY) until the kernel has reaped it.
const cgroupBusyWait = 3 * time.Second

func rmdirCgroup(dir string, leaf bool) error {
	deadline := time.Now().Add(cgroupBusyWait)
	for {
		err := unix.Rmdir(dir)
		if !leaf || !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
