package hostinfo

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func fixture(name string) Options {
	return Options{
		ProcRoot: filepath.Join("testdata", name, "proc"),
		SysRoot:  filepath.Join("testdata", name, "sys"),
		BootRoot: filepath.Join("testdata", name, "boot"),
		EtcRoot:  filepath.Join("testdata", name, "etc"),
	}
}

func TestCollectFixtures(t *testing.T) {
	for _, tc := range []struct {
		name string
		want Fingerprint
	}{
		{
			// Recorded on a KVM microVM with hybrid cgroups and no cpufreq.
			name: "hybrid",
			want: Fingerprint{
				CPUModel: "AMD EPYC", Microcode: "0x1000065", OnlineCPUs: 2,
				SMT: "notsupported", MemTotalKiB: 24684084,
				CgroupMode: CgroupHybrid, Virtualized: "yes",
				// tracefs left out, as where it is not mounted: the
				// kernel's own configuration answers.
				RealTime: RealTime{
					RTRuntimeUS: 950000, RTPeriodUS: 1000000,
					IRQsPerCPU: map[int]int{0: 1, 1: 2},
					Tracers:    map[string]string{"timerlat": TracerAbsent, "osnoise": TracerAbsent, "hwlat": TracerAbsent},
				},
			},
		},
		{
			// Hand-written: bare metal, SMT on, performance governor, cgroup v2.
			name: "v2",
			want: Fingerprint{
				MachineID: "0f3c9a7d1e2b4c5d8e9f0a1b2c3d4e5f",
				CPUModel:  "Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz", Microcode: "0x5003604",
				OnlineCPUs: 4, SMT: "on", Governor: "performance", MemTotalKiB: 65652148,
				CgroupMode: CgroupV2,
				// RT throttling off, CPUs 2 and 4 isolated and tickless,
				// one interrupt still allowed on every CPU, tracefs mounted.
				RealTime: RealTime{
					RTRuntimeUS: -1, RTPeriodUS: 1000000, IsolatedCPUs: "2,4", NohzFull: "2,4",
					IRQsPerCPU: map[int]int{0: 3, 1: 3, 2: 1, 4: 1},
					Tracers:    map[string]string{"timerlat": TracerAvailable, "osnoise": TracerAvailable, "hwlat": TracerAvailable},
				},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Collect(fixture(tc.name))
			if err != nil {
				t.Fatal(err)
			}
			if got.Kernel == "" || got.Arch == "" {
				t.Errorf("uname fields empty: %+v", got)
			}
			// The uname fields describe the machine running the test, not
			// the fixture, and so does the preemption model they imply;
			// compare the rest.
			got.Hostname, got.Kernel, got.KernelFull, got.Arch = "", "", "", ""
			got.RealTime.Preemption = ""
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestMachineIdentity: a machine is its host name, architecture, CPU
// model and machine-id; a new kernel is the same machine, two boxes of one
// name are two, and a fingerprint from before machine-ids were recorded
// matches on the rest.
func TestMachineIdentity(t *testing.T) {
	lab := Fingerprint{Hostname: "debian", MachineID: "0f3c9a7d1e2b4c5d8e9f", Arch: "x86_64", CPUModel: "Xeon", Kernel: "6.1.0"}
	if got := lab.Machine(); got != "debian (x86_64, Xeon, id 0f3c9a7d)" {
		t.Errorf("Machine() = %q", got)
	}
	upgraded, twin, old, otherCPU := lab, lab, lab, lab
	upgraded.Kernel, twin.MachineID, old.MachineID, otherCPU.CPUModel = "6.12.0", "77aa", "", "EPYC"
	for _, tc := range []struct {
		what string
		fp   Fingerprint
		same bool
	}{{"a new kernel", upgraded, true}, {"another box of the same name", twin, false}, {"a run without machine-id", old, true}, {"another CPU", otherCPU, false}} {
		if got := lab.SameMachine(tc.fp); got != tc.same || tc.fp.SameMachine(lab) != got {
			t.Errorf("%s: SameMachine = %v, want %v both ways", tc.what, got, tc.same)
		}
		if (lab.Machine() == tc.fp.Machine()) != (tc.same && tc.fp.MachineID != "") {
			t.Errorf("%s: named %q against %q", tc.what, tc.fp.Machine(), lab.Machine())
		}
	}
	if got := (Fingerprint{}).Machine(); got != "unknown host" {
		t.Errorf("an empty fingerprint is %q", got)
	}
}

func TestCollectMissingCPUInfo(t *testing.T) {
	opts := fixture("v2")
	opts.ProcRoot = t.TempDir()
	if _, err := Collect(opts); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("want fs.ErrNotExist, got %v", err)
	}
}

func TestCgroupModeFixtures(t *testing.T) {
	for name, want := range map[string]string{"v1": CgroupV1, "v2": CgroupV2, "hybrid": CgroupHybrid} {
		got, err := CgroupMode(fixture(name).SysRoot)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got != want {
			t.Errorf("%s: got %q, want %q", name, got, want)
		}
	}
	if _, err := CgroupMode(t.TempDir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no fs/cgroup: want fs.ErrNotExist, got %v", err)
	}
}

// TestCollectLive runs against the real /proc and /sys, where the cgroup
// mode comes from statfs rather than the fixture signal. What it finds
// depends on the host; that it finds it without error does not.
func TestCollectLive(t *testing.T) {
	if _, err := os.Stat("/sys/fs/cgroup"); err != nil {
		t.Skipf("no /sys/fs/cgroup on this host: %v", err)
	}
	fp, err := Collect(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if fp.OnlineCPUs < 1 || fp.MemTotalKiB <= 0 || fp.CgroupMode == "" {
		t.Errorf("implausible live fingerprint: %+v", fp)
	}
	t.Logf("live fingerprint: %+v", fp)
}
