package cgroup

import (
	"errors"
	"math"
	"testing"
)

func TestCPUUsageOnRecordedFiles(t *testing.T) {
	v1 := Mount{Dir: "testdata/usage-v1/cpuacct", CPUAcct: true}
	v2 := Mount{Dir: "testdata/usage-v2", V2: true}
	freezer := Mount{Dir: "testdata/usage-v1/cpuacct", Freezer: true}
	for _, tc := range []struct {
		name   string
		mounts []Mount
		want   float64
	}{
		{"v1", []Mount{v1}, 0.280115349},
		{"v2", []Mount{v2}, 0.280439},
		// On a hybrid host the hierarchy that counted the most holds
		// the processes put in one only.
		{"hybrid", []Mount{v1, freezer, v2}, 0.280439},
		// A hierarchy that does not account CPU time is not read.
		{"freezer", []Mount{freezer}, 0},
		{"none holds the run", []Mount{{Dir: "testdata/proc", V2: true}}, 0},
	} {
		got, err := CPUUsage(tc.mounts, PathOf("r1", ""))
		if err != nil || math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
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
