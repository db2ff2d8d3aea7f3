// Package programs is the table of the programs vfleet's workloads run
// that Debian ships, each with its package: the one list vfleet's image
// installs, every run records the versions of and doctor looks for in the
// image. Each workload names its entries (workload.Workload's Programs),
// and a test there holds the table to the registered workloads. It
// imports nothing of vfleet's, so that the image, which the tests' own
// helpers build, reads it without importing the workloads, whose tests
// use those helpers.
package programs

import "slices"

// Program is a program a workload runs and where vfleet's image gets it.
type Program struct {
	// Name is the program as the agent finds it in PATH, e.g. "cyclictest".
	Name string
	// Package is the Debian package that ships it, e.g. "rt-tests"; empty
	// for vfleet's own programs (package image/native), which every
	// vfleet image carries, built from source.
	Package string
}

// The programs from Debian.
var (
	Cyclictest = Program{Name: "cyclictest", Package: "rt-tests"}
	Fio        = Program{Name: "fio", Package: "fio"}
	Iperf3     = Program{Name: "iperf3", Package: "iperf3"}
	Lame       = Program{Name: "lame", Package: "lame"}
	RTLA       = Program{Name: "rtla", Package: "rtla"}
	Sockperf   = Program{Name: "sockperf", Package: "sockperf"}
	StressNG   = Program{Name: "stress-ng", Package: "stress-ng"}
	Sysbench   = Program{Name: "sysbench", Package: "sysbench"}
)

// Debian lists the programs from Debian, sorted by name.
func Debian() []Program {
	return []Program{Cyclictest, Fio, Iperf3, Lame, RTLA, Sockperf, StressNG, Sysbench}
}

// Packages are the Debian packages of Debian's programs, each once,
// sorted, so that the image's recipe hash moves only when the set does.
func Packages() []string {
	var out []string
	for _, p := range Debian() {
		out = append(out, p.Package)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
