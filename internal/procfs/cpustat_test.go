package procfs

import (
	"errors"
	"testing"
)

func TestCPUStatOnRecordedFile(t *testing.T) {
	got, err := ReadCPUStat("testdata/cpu")
	if err != nil {
		t.Fatal(err)
	}
	// The recorded machine had two CPUs; busy excludes idle and iowait,
	// total the guest columns (already in user).
	if want := (CPUStat{Busy: 29902 + 9996 + 816 + 543, Total: 29902 + 9996 + 170270 + 1463 + 816 + 543, Kernel: 9996 + 816,
		Tasks: 29902 + 9996, Steal: 543, CPUs: 2}); got != want {
		t.Fatalf("parsed %+v; want %+v", got, want)
	}
	for _, bad := range []string{"", "intr 1 2\n", "cpu  1 2 3\ncpu0 1 2 3 4 5 6 7 8\n", "cpu  a b c d e f g h\ncpu0 1\n"} {
		if _, err := ParseCPUStat([]byte(bad)); !errors.Is(err, ErrCPUStat) {
			t.Errorf("%q: %v; want ErrCPUStat", bad, err)
		}
	}
}
