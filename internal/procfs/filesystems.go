package procfs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Filesystems are the file system types this kernel offers, read from
// procRoot/filesystems: procRoot is /proc, or a fixture tree in tests.
func Filesystems(procRoot string) (map[string]bool, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, "filesystems"))
	if err != nil {
		return nil, fmt.Errorf("file system types: %w", err)
	}
	return parseFilesystems(b), nil
}

// parseFilesystems reads /proc/filesystems: each line a file system
// type, after "nodev" and a tab when it needs no block device.
func parseFilesystems(b []byte) map[string]bool {
	out := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 0 {
			out[f[len(f)-1]] = true
		}
	}
	return out
}
