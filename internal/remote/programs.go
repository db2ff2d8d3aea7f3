package remote

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"strings"

	"github.com/vfleet/vfleet/internal/tools"
	"github.com/vfleet/vfleet/internal/workload/programs"
)

// Ethtool is what the peer needs to describe its NIC (Fingerprint).
var Ethtool = programs.Program{Name: "ethtool", Package: "ethtool"}

// Found is a program found on the peer.
type Found struct {
	programs.Program
	Path string
	// Version is its Debian package's, empty when dpkg does not know it
	// (a program installed by hand).
	Version string
}

// CheckPrograms looks for each program in the peer's PATH, before anything
// starts there, and asks dpkg for the versions of the packages of those
// found. Each missing program is a tools.MissingError (tools.ErrMissing)
// naming its Debian package.
func (m *Machine) CheckPrograms(ctx context.Context, progs []programs.Program) ([]Found, error) {
	if len(progs) == 0 {
		return nil, nil
	}
	names := make([]string, len(progs))
	for i, p := range progs {
		names[i] = p.Name
	}
	out, err := m.sh(ctx, nil, `for p in "$@"; do printf '%s\t%s\n' "$p" "$(command -v "$p")"; done`, names...)
	if err != nil {
		return nil, err
	}
	paths := tabbed(out)
	var found []Found
	var missing []error
	var packages []string
	for _, p := range progs {
		if paths[p.Name] == "" {
			missing = append(missing, &tools.MissingError{Name: p.Name, Install: "install the Debian package " + p.Package + " on " + m.Target.String()})
			continue
		}
		found = append(found, Found{Program: p, Path: paths[p.Name]})
		packages = append(packages, p.Package)
	}
	if len(packages) > 0 {
		// dpkg-query fails for a package it does not know, and says which
		// on its standard error; the others' lines are printed all the same.
		out, _ := m.sh(ctx, nil, `dpkg-query -W -f '${Package}\t${Version}\n' "$@" 2>/dev/null; true`, packages...)
		versions := tabbed(out)
		for i := range found {
			found[i].Version = versions[found[i].Package]
		}
	}
	return found, errors.Join(missing...)
}

// tabbed reads lines of "KEY\tVALUE".
func tabbed(out []byte) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "\t"); ok {
			m[k] = v
		}
	}
	return m
}
