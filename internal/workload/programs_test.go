package workload

import (
	"slices"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/image/native"
	"github.com/vfleet/vfleet/internal/workload/programs"
)

// programParams are parameters, beyond the defaults, under which a
// workload runs programs its defaults do not: each declared program must
// be run by one of them.
var programParams = map[string][]Params{
	"net-latency": {{"proto": "tcp", "background_streams": "1"}},
}

// ranPrograms lists the programs w runs with parameters p, for a duration
// every workload accepts: its client and, for a network workload, its
// servers, background load and the commands around a measurement.
func ranPrograms(t *testing.T, w Workload, p Params) []string {
	t.Helper()
	n, ok := w.(Networked)
	if !ok {
		ex, err := w.Command(p, 10*time.Second)
		if err != nil {
			t.Fatalf("%s %v: %v", w.Name(), p, err)
		}
		return append([]string{ex.Argv[0]}, ex.Runs...)
	}
	ne, err := n.NetCommand(p, 10*time.Second, testPeer)
	if err != nil {
		t.Fatalf("%s %v: %v", w.Name(), p, err)
	}
	var out []string
	for _, ex := range slices.Concat([]Exec{ne.Exec}, ne.Background, ne.ServerPre, ne.ServerPost) {
		out = append(out, ex.Argv[0])
	}
	for _, s := range n.Servers(p, Listen{Addr: testPeer.Addr, Port: testPeer.Port}) {
		out = append(out, s.Argv[0])
	}
	return out
}

// A workload's Programs must be exactly the programs its adapter runs:
// the image, the run's recorded versions and doctor follow them.
func TestProgramsAreWhatEveryWorkloadRuns(t *testing.T) {
	own := map[string]bool{}
	for _, p := range native.Programs {
		own[p.Name] = true
	}
	for _, name := range Names() {
		w := mustLookup(t, name)
		declared := w.Programs()
		if _, users := w.(ParamsParser); users {
			if len(declared) > 0 {
				t.Errorf("%s runs the user's programs but declares %v", name, declared)
			}
			continue
		}
		names := map[string]bool{}
		for _, p := range declared {
			names[p.Name] = true
			if p.Package == "" && !own[p.Name] {
				t.Errorf("%s: %s has no Debian package and is not one of vfleet's own programs", name, p.Name)
			}
		}
		ran := map[string]bool{}
		for _, p := range append([]Params{nil}, programParams[name]...) {
			for _, prog := range ranPrograms(t, w, merge(w.Defaults(), p)) {
				ran[prog] = true
				if !names[prog] {
					t.Errorf("%s %v runs %s, which it does not declare in %v", name, p, prog, declared)
				}
			}
		}
		for prog := range names {
			if !ran[prog] {
				t.Errorf("%s declares %s but never runs it (add parameters that do to programParams)", name, prog)
			}
		}
	}
}

// The table the image, the run's recorded versions and doctor read is
// exactly the registered workloads' programs from Debian: one a workload
// runs and the table lacks would be missing from the image, one no
// workload runs would be installed for nothing.
func TestProgramsTableIsTheWorkloads(t *testing.T) {
	table := programs.Debian()
	used := map[Program]bool{}
	for _, name := range Names() {
		for _, p := range mustLookup(t, name).Programs() {
			if p.Package == "" {
				continue
			}
			used[p] = true
			if !slices.Contains(table, p) {
				t.Errorf("%s runs %s from %s, which programs.Debian %v lacks", name, p.Name, p.Package, table)
			}
		}
	}
	for _, p := range table {
		if !used[p] {
			t.Errorf("programs.Debian lists %s, which no workload runs", p.Name)
		}
	}
}
