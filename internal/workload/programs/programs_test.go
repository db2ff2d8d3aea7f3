package programs

import (
	"slices"
	"strings"
	"testing"
)

func TestDebianIsSortedWithAPackageEach(t *testing.T) {
	d := Debian()
	if !slices.IsSortedFunc(d, func(a, b Program) int { return strings.Compare(a.Name, b.Name) }) ||
		len(slices.CompactFunc(slices.Clone(d), func(a, b Program) bool { return a.Name == b.Name })) != len(d) {
		t.Errorf("Debian not sorted by name, each once: %v", d)
	}
	for _, p := range d {
		if p.Name == "" || p.Package == "" {
			t.Errorf("%+v: a program from Debian needs its name and package", p)
		}
		if !slices.Contains(Packages(), p.Package) {
			t.Errorf("Packages %v lack %s's %s", Packages(), p.Name, p.Package)
		}
	}
	if got := Packages(); !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Errorf("Packages not sorted, each once: %v", got)
	}
}
