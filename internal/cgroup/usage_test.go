package cgroup

import (
	"errors"
	"math"
	"testing"
)

func TestCPUUsageOnRecordedFiles(t *testing.T) {
	for _, tc := range []struct {
		root  string
		want  float64
		found bool
	}{
		{"testdata/usage-v1", 0.280115349, true},
		{"testdata/usage-v2", 0.280439, true},
		{"testdata/proc", 0, false}, // no hierarchy holds the run
	} {
		got, found, err := CPUUsage(tc.root, PathOf("r1", ""))
		if err != nil || found != tc.found || math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: %v, %v, %v; want %v, %v", tc.root, got, found, err, tc.want, tc.found)
		}
	}
}

func TestMalformedUsageIsErrUsage(t *testing.T) {
	for name, f := range map[string]func() error{
		"cpuacct text":    func() error { _, err := ParseCPUAcctUsage([]byte("max\n")); return err },
		"cpuacct empty":   func() error { _, err := ParseCPUAcctUsage(nil); return err },
		"cpu.stat absent": func() error { _, err := ParseCPUStatV2([]byte("user_usec 5\n")); return err },
		"cpu.stat value":  func() error { _, err := ParseCPUStatV2([]byte("usage_usec -5\n")); return err },
	} {
		if err := f(); !errors.Is(err, ErrUsage) {
			t.Errorf("%s: got %v, want ErrUsage", name, err)
		}
	}
}
