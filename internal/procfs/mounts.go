package procfs

import (
	"fmt"
	"strings"

	promfs "github.com/prometheus/procfs"
)

// Mount is one line of a mount table, as vfleet uses it.
type Mount struct {
	Point  string // where it is mounted, the kernel's escapes undone
	FSType string
	// Super are the superblock's options (a v1 cgroup's controllers).
	Super map[string]string
}

// Mounts is this process's mount table, read from
// procRoot/self/mountinfo: procRoot is /proc, or a fixture tree in tests.
func Mounts(procRoot string) ([]Mount, error) {
	fs, err := promfs.NewFS(procRoot)
	if err != nil {
		return nil, fmt.Errorf("mount table: %w", err)
	}
	infos, err := fs.GetMounts()
	if err != nil {
		return nil, fmt.Errorf("mount table: %w", err)
	}
	out := make([]Mount, len(infos))
	for i, m := range infos {
		out[i] = Mount{Point: unescapeMountPath(m.MountPoint), FSType: m.FSType, Super: m.SuperOptions}
	}
	return out, nil
}

// unescapeMountPath undoes mountinfo's octal escapes of space, tab,
// newline and backslash, which github.com/prometheus/procfs leaves.
var unescapeMountPath = strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace
