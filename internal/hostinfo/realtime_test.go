package hostinfo

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Version strings (uname -v) as these kernels print them.
const (
	unameThisHost      = "#1 SMP PREEMPT_DYNAMIC @0"
	unameDebianGeneric = "#1 SMP PREEMPT_DYNAMIC Debian 6.1.153-1 (2025-09-20)"
	unameDebianRT      = "#1 SMP PREEMPT_RT Debian 6.1.69-1 (2023-12-30)"
	unameDebianRTOld   = "#1 SMP PREEMPT RT Debian 4.19.118-2 (2020-04-29)"
	unameDebianOld     = "#1 SMP Debian 4.8.15-2 (2017-01-04)"
	unameRaspberryPi   = "#1 SMP PREEMPT Debian 1:6.12.47-1+rpt1 (2025-09-16)"
)

func TestPreemption(t *testing.T) {
	voluntary := kernelConfig{"CONFIG_PREEMPT_VOLUNTARY": "y", "CONFIG_PREEMPT_NONE": "n"}
	for _, tc := range []struct {
		name                       string
		version, realtime, cmdline string
		config                     kernelConfig
		want                       string
	}{
		{"this host", unameThisHost, "", "console=ttyS0 quiet", nil, "dynamic"},
		{"dynamic, mode chosen at boot", unameDebianGeneric, "", "ro quiet preempt=full", nil, "dynamic (preempt=full)"},
		{"last preempt= wins", unameDebianGeneric, "", "preempt=none quiet preempt=voluntary", nil, "dynamic (preempt=voluntary)"},
		{"init's arguments are not the kernel's", unameDebianGeneric, "", "quiet -- preempt=full", nil, "dynamic"},
		{"mainline RT", unameDebianRT, "", "", nil, "rt"},
		{"RT patch before 5.x", unameDebianRTOld, "", "", nil, "rt"},
		{"RT patch's sysfs flag", unameDebianGeneric, "1\n", "preempt=full", nil, "rt"},
		{"sysfs flag off", unameDebianGeneric, "0\n", "", nil, "dynamic"},
		{"full", unameRaspberryPi, "", "", nil, "full"},
		{"lazy prints PREEMPT too", unameRaspberryPi, "", "", kernelConfig{"CONFIG_PREEMPT_LAZY": "y"}, "lazy"},
		{"no flag, no config", unameDebianOld, "", "", nil, ""},
		{"no flag, voluntary config", unameDebianOld, "", "", voluntary, "voluntary"},
		{"no flag, none config", unameDebianOld, "", "", kernelConfig{"CONFIG_PREEMPT_NONE": "y"}, "none"},
		// A dynamic kernel's PREEMPT_NONE=y is only its default mode.
		{"dynamic ignores the default", unameThisHost, "", "", kernelConfig{"CONFIG_PREEMPT_NONE": "y"}, "dynamic"},
		{"nothing known", "", "", "", nil, ""},
	} {
		if got := preemption(tc.version, tc.realtime, tc.cmdline, tc.config); got != tc.want {
			t.Errorf("%s: preemption(%q, %q, %q) = %q, want %q", tc.name, tc.version, tc.realtime, tc.cmdline, got, tc.want)
		}
	}
}

func allTracers(status string) map[string]string {
	return map[string]string{"timerlat": status, "osnoise": status, "hwlat": status}
}

// failingReader hands out its text, then an error instead of EOF.
type failingReader struct{ r io.Reader }

func (f failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, errors.New("device gone")
	}
	return n, err
}

func TestTracerSupport(t *testing.T) {
	rtConfig, err := os.ReadFile(filepath.Join("testdata", "rt", "boot", "config-6.1.0-17-rt-amd64"))
	if err != nil {
		t.Fatal(err)
	}
	gz, err := os.Open(filepath.Join("testdata", "hybrid", "proc", "config.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer gz.Close()
	zr, err := gzip.NewReader(gz)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		config io.Reader
		want   map[string]string
	}{
		{"Debian RT, uncompressed", strings.NewReader(string(rtConfig)), allTracers(TracerBuiltIn)},
		{"this host's, gzipped", zr, allTracers(TracerAbsent)},
		// Kconfig leaves out an option whose dependencies are not met.
		{"not mentioned", strings.NewReader("CONFIG_FTRACE=y\nCONFIG_OSNOISE_TRACER=y\n"),
			map[string]string{"timerlat": TracerAbsent, "osnoise": TracerBuiltIn, "hwlat": TracerAbsent}},
		{"empty", strings.NewReader(""), allTracers(TracerUnknown)},
		{"not a config", strings.NewReader("hello\n"), allTracers(TracerUnknown)},
		{"cut short", failingReader{strings.NewReader("CONFIG_TIMERLAT_TRACER=y\n# CONFIG_HWLAT_TRACER is not set\n")},
			map[string]string{"timerlat": TracerBuiltIn, "osnoise": TracerUnknown, "hwlat": TracerAbsent}},
	} {
		if got := TracerSupport(tc.config); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestCollectRealTimeRT reads the hand-written Debian PREEMPT_RT host: no
// tracefs mounted, no /proc/config.gz, the configuration in /boot.
func TestCollectRealTimeRT(t *testing.T) {
	got := collectRealTime(fixture("rt"), "6.1.0-17-rt-amd64", unameDebianRT)
	want := RealTime{
		Preemption: "rt", RTRuntimeUS: 950000, RTPeriodUS: 1000000, IsolatedCPUs: "1-3",
		Tracers: allTracers(TracerBuiltIn + " (tracefs not mounted)"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	// Another kernel's configuration says nothing of this one.
	if got := collectRealTime(fixture("rt"), "6.1.0-40-amd64", unameDebianGeneric); !reflect.DeepEqual(got.Tracers, allTracers(TracerUnknown)) {
		t.Errorf("no configuration for the release: tracers %v", got.Tracers)
	}
}

func TestCollectRealTimePreemption(t *testing.T) {
	for name, tc := range map[string]struct{ version, want string }{
		"v2":     {unameDebianGeneric, "dynamic (preempt=full)"},
		"hybrid": {unameThisHost, "dynamic"},
		// The RT patch's flag outranks what the version string says.
		"rt": {unameDebianGeneric, "rt"},
	} {
		if got := collectRealTime(fixture(name), "", tc.version).Preemption; got != tc.want {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
}

// writeTree lays out files (path → content) under a fresh directory.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestKernelTracers(t *testing.T) {
	builtIn := kernelConfig{"CONFIG_TIMERLAT_TRACER": "y", "CONFIG_OSNOISE_TRACER": "y", "CONFIG_HWLAT_TRACER": "n"}
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  map[string]string
	}{
		// Where debugfs is mounted, tracefs appears inside it too; the
		// running kernel's list outranks its configuration.
		{"tracefs under debugfs", map[string]string{"sys/kernel/debug/tracing/available_tracers": "blk function nop\n"},
			allTracers(TracerAbsent)},
		{"tracefs", map[string]string{
			"sys/kernel/tracing/available_tracers":       "timerlat osnoise nop\n",
			"sys/kernel/debug/tracing/available_tracers": "nop\n"},
			map[string]string{"timerlat": TracerAvailable, "osnoise": TracerAvailable, "hwlat": TracerAbsent}},
		{"not mounted", map[string]string{"sys/kernel/tracing/.keep": ""},
			map[string]string{"timerlat": "built in (tracefs not mounted)", "osnoise": "built in (tracefs not mounted)", "hwlat": TracerAbsent}},
	} {
		root := writeTree(t, tc.files)
		opts := Options{ProcRoot: filepath.Join(root, "proc"), SysRoot: filepath.Join(root, "sys"), BootRoot: filepath.Join(root, "boot")}
		if got := kernelTracers(opts, builtIn, true); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestCollectRealTimeNothingReadable: every piece is optional, and none
// is made up.
func TestCollectRealTimeNothingReadable(t *testing.T) {
	root := t.TempDir()
	got := collectRealTime(Options{ProcRoot: root, SysRoot: root, BootRoot: root}, "6.1.0-40-amd64", "")
	want := RealTime{Tracers: allTracers(TracerUnknown)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestIRQsPerCPUWithoutOnlineList(t *testing.T) {
	root := writeTree(t, map[string]string{
		"3/smp_affinity_list": "0-1\n",
		"9/smp_affinity_list": "1\n",
		"9/spurious":          "count 0\n",
	})
	if got, want := irqsPerCPU(root, nil), map[int]int{0: 1, 1: 2}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got := irqsPerCPU(filepath.Join(root, "absent"), []int{0}); got != nil {
		t.Errorf("no /proc/irq: %v", got)
	}
}

func TestCPUListFile(t *testing.T) {
	root := writeTree(t, map[string]string{"null": "(null)\n", "empty": "\n", "set": "2-3\n"})
	for name, want := range map[string]string{"null": "", "empty": "", "set": "2-3", "absent": ""} {
		if got := cpuListFile(filepath.Join(root, name)); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}

func TestDescribeTracers(t *testing.T) {
	for _, tc := range []struct {
		in   map[string]string
		want string
	}{
		{allTracers(TracerAbsent), "timerlat, osnoise, hwlat not in this kernel"},
		{map[string]string{"hwlat": TracerAbsent, "osnoise": TracerAvailable, "timerlat": TracerAvailable},
			"timerlat, osnoise available; hwlat not in this kernel"},
		{map[string]string{"osnoise": "built in (tracefs not mounted)"}, "osnoise built in (tracefs not mounted)"},
		{nil, ""},
	} {
		if got := DescribeTracers(tc.in); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestTracerUsable(t *testing.T) {
	for status, want := range map[string]bool{
		TracerAvailable: true, TracerBuiltIn: true, "built in (tracefs not mounted)": true,
		TracerAbsent: false, TracerUnknown: false, "": false,
	} {
		if got := TracerUsable(status); got != want {
			t.Errorf("%q: %v, want %v", status, got, want)
		}
	}
}

// TestRealTimeJSON pins the stored names: runs already in a database are
// read back through them.
func TestRealTimeJSON(t *testing.T) {
	fp := Fingerprint{RealTime: RealTime{Preemption: "rt", RTRuntimeUS: -1, RTPeriodUS: 1000000,
		IRQsPerCPU: map[int]int{0: 3, 1: 0}, Tracers: map[string]string{"timerlat": TracerAvailable}}}
	b, err := json.Marshal(fp)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"real_time":{`, `"preemption":"rt"`, `"rt_runtime_us":-1`, `"rt_period_us":1000000`,
		`"irqs_per_cpu":{"0":3,"1":0}`, `"tracers":{"timerlat":"available"}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	var back Fingerprint
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, fp) {
		t.Errorf("round trip: %+v, want %+v", back, fp)
	}
	// A fingerprint that recorded nothing of it stores what it did before.
	if b, err := json.Marshal(Fingerprint{Hostname: "lab1"}); err != nil || strings.Contains(string(b), "real_time") {
		t.Errorf("empty RealTime stored: %s, %v", b, err)
	}
}
