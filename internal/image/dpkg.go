package image

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// ParseDpkgStatus reads a dpkg status file and returns the version of each
// installed package. Records are blank-line separated; continuation lines
// start with a space.
func ParseDpkgStatus(r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	var pkg, version, status string
	flush := func() {
		if pkg != "" && version != "" && strings.HasSuffix(status, " installed") {
			out[pkg] = version
		}
		pkg, version, status = "", "", ""
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			flush()
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			continue
		}
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("dpkg status: malformed line %q", line)
		}
		value = strings.TrimSpace(value)
		switch key {
		case "Package":
			pkg = value
		case "Version":
			version = value
		case "Status":
			status = value
		}
	}
	flush()
	return out, sc.Err()
}
