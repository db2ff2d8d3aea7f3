package procfs

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseCPUInfoErrors(t *testing.T) {
	if _, err := ParseCPUInfo(strings.NewReader("\n\n")); err == nil {
		t.Error("empty cpuinfo accepted")
	}
	ci, err := ParseCPUInfo(strings.NewReader("processor\t: 0\nflags\t\t: fpu vme\n\nprocessor\t: 1\nflags\t\t: hypervisor\n"))
	if err != nil {
		t.Fatal(err)
	}
	if ci.Hypervisor {
		t.Error("flags of the second processor leaked into the first")
	}
}

func TestParseMemTotal(t *testing.T) {
	for in, ok := range map[string]bool{
		"MemFree: 1 kB\nMemTotal:  2048 kB\n": true,
		"MemTotal: 2048\n":                    false,
		"MemTotal: x kB\n":                    false,
		"MemFree: 1 kB\n":                     false,
	} {
		n, err := ParseMemTotal(strings.NewReader(in))
		if ok && (err != nil || n != 2048) {
			t.Errorf("%q: got %d, %v", in, n, err)
		}
		if !ok && err == nil {
			t.Errorf("%q: accepted as %d", in, n)
		}
	}
}

func TestParseCPUListCount(t *testing.T) {
	for in, want := range map[string]int{
		"0\n": 1, "0-1\n": 2, "0-3,6,8-9": 7, "": -1, "3-1": -1, "a-b": -1, "0,": -1,
	} {
		got, err := ParseCPUListCount(strings.NewReader(in))
		if want < 0 {
			if err == nil {
				t.Errorf("%q: accepted as %d", in, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%q: got %d, %v; want %d", in, got, err, want)
		}
	}
}

// TestCPUList: the kernel's cpu lists (cpusets, /sys's online CPUs, a
// scenario's pin_vcpus) read in the order written, and written back with
// their ranges folded.
func TestCPUList(t *testing.T) {
	for in, want := range map[string][]int{
		"0-2,5": {0, 1, 2, 5}, "3,1,2": {3, 1, 2}, "7\n": {7}, "0-3,6,8-9": {0, 1, 2, 3, 6, 8, 9},
	} {
		got, err := ParseCPUList(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "a", "3-1", "-1", "0,", "1-"} {
		if got, err := ParseCPUList(bad); err == nil {
			t.Errorf("%q accepted as %v", bad, got)
		}
	}
	if got := FormatCPUList([]int{0, 1, 2, 5, 7, 8}); got != "0-2,5,7-8" {
		t.Errorf("folded %q; want 0-2,5,7-8", got)
	}
}
