package procfs

import (
	"strconv"
	"strings"
)

// Partition is a block device /proc/partitions lists.
type Partition struct {
	Major, Minor int
	Name         string
}

// ParsePartitions reads /proc/partitions, a guest's as well as this
// host's: its header, and names with a slash (which no /dev entry has),
// are left out.
func ParsePartitions(text string) []Partition {
	var out []Partition
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) != 4 || strings.ContainsRune(f[3], '/') {
			continue
		}
		major, err1 := strconv.Atoi(f[0])
		minor, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, Partition{Major: major, Minor: minor, Name: f[3]})
	}
	return out
}
