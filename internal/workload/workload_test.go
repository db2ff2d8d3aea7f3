package workload

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func recorded(t *testing.T, name string) (stdout, stderr []byte) {
	t.Helper()
	var err error
	if stdout, err = readRecording(filepath.Join("testdata", name+".stdout")); err != nil {
		t.Fatal(err)
	}
	if stderr, err = os.ReadFile(filepath.Join("testdata", name+".stderr")); err != nil {
		t.Fatal(err)
	}
	return stdout, stderr
}

func mustLookup(t *testing.T, name string) Workload {
	t.Helper()
	w, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// unixbenchParams take UnixBench's index score and one test's raw result
// from a real run's report, as docs/workloads.md shows.
var unixbenchParams = Params{"argv": `["./Run","-i","1","-c","1","dhry2reg"]`, "stop": StopExit, "workdir": "", "timeout": "",
	"metrics": `[{"name":"index","unit":"score","better":"higher","regex":"System Benchmarks Index Score.*\\s([0-9.]+)"},` +
		`{"name":"dhrystone_lps","unit":"lps","better":"higher","regex":"Dhrystone 2 using register variables\\s+([0-9.]+) lps"}]`}

// fioJSONParams take fio's IOPS from its JSON output by a JSONPath.
var fioJSONParams = Params{"argv": `["fio","--output-format=json","job.fio"]`, "stop": StopExit, "workdir": "", "timeout": "",
	"metrics": `[{"name":"iops","unit":"IO/s","better":"higher","json":"$.jobs[0].read.iops"}]`}

// Each case is a real output recorded from the tool in the guest image.
var parseCases = []struct {
	workload, recording string
	want                map[string]float64 // metric -> value
	params              Params             // nil: the workload's defaults
}{
	{"cpu", "sysbench-cpu", map[string]float64{"events_per_sec": 4283.31}, nil},
	{"memory", "stress-ng-stream", map[string]float64{"stream_ops_per_sec": 12.38, "read_bw": 10184.58, "write_bw": 6789.72, "mflops": 889.94}, nil},
	{"ctxswitch", "stress-ng-switch", nil, nil},
	{"syscall", "stress-ng-sysinfo", map[string]float64{"syscall_ops_per_sec": 103771.66}, nil},
	{"stream", "vfleet-stream", map[string]float64{"copy_mbps": 34549.2, "scale_mbps": 29679.6, "add_mbps": 30879.7, "triad_mbps": 35770.5}, nil},
	{"stream", "vfleet-stream-small", nil, nil},
	{"ctxswitch-pinned", "vfleet-pingpong-same", map[string]float64{"switch_latency": 2639.7, "round_trips_per_sec": 189414.8}, nil},
	{"ctxswitch-pinned", "vfleet-pingpong-split", map[string]float64{"switch_latency": 24239.0}, nil},
	{"cachebench", "vfleet-cachebench-sweep", map[string]float64{"read_mbps": 44910.5, "write_mbps": 24791.0, "rmw_mbps": 24267.2}, nil},
	{"lame", "vfleet-encode-lame", map[string]float64{"encode_s": 2.590531, "encode_cpu_s": 1.103191}, nil},
	{"fio", "fio-randread", nil, nil},
	{"fio", "fio-write", nil, nil},
	{"net-throughput", "iperf3-tcp-up", map[string]float64{"net.throughput_bps": 7087678706.83996, "net.retransmits": 9487}, nil},
	{"net-throughput", "iperf3-udp-down", nil, nil},
	{"net-latency", "sockperf-udp", nil, nil},
	{"net-latency", "sockperf-tcp-bg", nil, nil},
	{"timer-latency", "cyclictest-busy-other", map[string]float64{"timer.overflows": 10, "timer.latency_us.max": 52500}, nil},
	{"timerlat", "rtla-timerlat-hist-rt-vm", map[string]float64{"timerlat.irq_us.max": 7312, "timerlat.thread_us.max": 7312}, nil},
	{"osnoise", "rtla-osnoise-top-rt-vm", map[string]float64{"osnoise.max_single_us": 23712}, nil},
	{"command", "unixbench-dhry2reg", map[string]float64{"index": 4750.9, "dhrystone_lps": 55443177.5}, unixbenchParams},
	{"command", "fio-randread", map[string]float64{"iops": 16061.469265}, fioJSONParams},
	{"net-command", "iperf3-json-tcp", map[string]float64{"received_bps": 18102799944.434841, "retransmits": 16}, iperf3JSONParams},
}

// iperf3JSONParams run iperf3 as a user's net-command: their server on
// the peer, their client in the guest, metrics by JSONPath.
var iperf3JSONParams = Params{"argv": `["iperf3","-c","{peer}","-p","{port}","-t","{duration}","-J"]`, "stop": StopExit, "workdir": "", "timeout": "",
	"server": `["iperf3","-s","-p","{port}"]`, "proto": "tcp", "pre": "", "post": "", ParamClient: ClientGuest,
	"metrics": `[{"name":"received_bps","unit":"bit/s","better":"higher","json":"$.end.sum_received.bits_per_second"},` +
		`{"name":"retransmits","unit":"count","better":"lower","json":"$.end.sum_sent.retransmits"}]`}

func TestParseRecordedOutputs(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.workload+"/"+tc.recording, func(t *testing.T) {
			stdout, stderr := recorded(t, tc.recording)
			w := mustLookup(t, tc.workload)
			params := tc.params
			if params == nil {
				params = w.Defaults()
			}
			samples, err := ParseOutput(w, params, stdout, stderr)
			if err != nil {
				t.Fatal(err)
			}
			if len(samples) == 0 {
				t.Fatal("no samples")
			}
			for _, s := range samples {
				if s.Value < 0 || s.Value == 0 && !mayBeZero[s.Metric] || s.Unit == "" || (s.Better != HigherIsBetter && s.Better != LowerIsBetter) {
					t.Errorf("implausible sample %+v", s)
				}
			}
			for metric, want := range tc.want {
				if got := find(samples, metric); got != want {
					t.Errorf("%s = %v, want %v", metric, got, want)
				}
			}
		})
	}
}

// mayBeZero are metrics that a sound recording may report as nothing:
// interruptions from a source that sent none, a tail the interrupt alone
// makes.
var mayBeZero = map[string]bool{
	"timerlat.sched_us.p99": true, "osnoise.hw_per_cpu_s": true, "osnoise.nmi_per_cpu_s": true,
	"osnoise.irq_per_cpu_s": true, "osnoise.softirq_per_cpu_s": true, "osnoise.thread_per_cpu_s": true,
}

func find(samples []Sample, metric string) float64 {
	for _, s := range samples {
		if s.Metric == metric {
			return s.Value
		}
	}
	return -1
}

func TestParseFioPicksTheDirectionThatDidIO(t *testing.T) {
	stdout, stderr := recorded(t, "fio-randread")
	samples, _ := mustLookup(t, "fio").Parse(stdout, stderr)
	var metrics []string
	for _, s := range samples {
		metrics = append(metrics, s.Metric)
	}
	if got := strings.Join(metrics, ","); got != "read_iops,read_bw,read_lat_mean,read_clat_p99" {
		t.Fatalf("metrics = %s", got)
	}
	if iops := find(samples, "read_iops"); iops < 16061 || iops > 16062 {
		t.Errorf("read_iops = %v, want 16061.47 from the recording", iops)
	}
	stdout, stderr = recorded(t, "fio-write")
	samples, _ = mustLookup(t, "fio").Parse(stdout, stderr)
	if find(samples, "write_iops") <= 0 || find(samples, "read_iops") != -1 {
		t.Errorf("write job samples = %+v", samples)
	}
}

func TestParseFailuresAreErrParse(t *testing.T) {
	for _, tc := range []struct{ workload, recording string }{
		{"cpu", "sysbench-cpu-badopt"},
		{"memory", "stress-ng-badopt"},
		{"ctxswitch", "stress-ng-badopt"},
		{"fio", "fio-badopt"},
		// stress-ng exits 0 but cannot measure a rate in too short a run.
		{"memory", "stress-ng-stream-short"},
		// The right tool's output for the wrong stressor is not a result.
		{"ctxswitch", "stress-ng-stream"},
		// A split pair in a guest of one CPU says why it cannot run.
		{"ctxswitch-pinned", "vfleet-pingpong-onecpu"},
		{"stream", "vfleet-pingpong-same"},
		// The encoder missing from the guest: vfleet-encode says so.
		{"lame", "vfleet-encode-noencoder"},
		{"lame", "vfleet-cachebench-sweep"},
		{"cachebench", "vfleet-stream"},
	} {
		stdout, stderr := recorded(t, tc.recording)
		_, err := mustLookup(t, tc.workload).Parse(stdout, stderr)
		if !errors.Is(err, ErrParse) {
			t.Errorf("%s on %s: err = %v, want ErrParse", tc.workload, tc.recording, err)
		}
	}
}

func TestMissingFiguresQuoteTheStressorsOwnReason(t *testing.T) {
	stdout, stderr := recorded(t, "stress-ng-stream-short")
	_, err := mustLookup(t, "memory").Parse(stdout, stderr)
	if err == nil || !strings.Contains(err.Error(), "(stream: run duration too short to determine memory rate)") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("err = %v", err)
	}
}

func TestEveryWorkloadHasARecordedOutput(t *testing.T) {
	covered := map[string]bool{}
	for _, tc := range parseCases {
		covered[tc.workload] = true
	}
	for _, name := range Names() {
		if !covered[name] {
			t.Errorf("workload %q has no recorded real output in parseCases", name)
		}
	}
}

func TestCommands(t *testing.T) {
	for _, tc := range []struct {
		workload string
		params   Params
		d        time.Duration
		want     []string
	}{
		{"cpu", nil, 3 * time.Second, []string{"sysbench", "cpu", "--threads=1", "--cpu-max-prime=10000", "--time=3", "run"}},
		{"cpu", Params{"threads": "2"}, 500 * time.Millisecond, []string{"sysbench", "cpu", "--threads=2", "--cpu-max-prime=10000", "--time=1", "run"}},
		{"memory", nil, 8 * time.Second, []string{"stress-ng", "--stream", "1", "--timeout", "8s", "--metrics"}},
		{"ctxswitch", Params{"instances": "2"}, 2 * time.Second, []string{"stress-ng", "--switch", "2", "--timeout", "2s", "--metrics"}},
		{"stream", Params{}, 3 * time.Second, []string{"vfleet-stream", "--seconds", "3"}},
		{"stream", Params{"threads": "2", "array_mib": "64"}, 1500 * time.Millisecond, []string{"vfleet-stream", "--seconds", "1.5", "--threads", "2", "--array-mib", "64"}},
		{"ctxswitch-pinned", Params{"placement": "split"}, 2 * time.Second, []string{"vfleet-pingpong", "--placement", "split", "--seconds", "2"}},
		{"cachebench", nil, 3 * time.Second, []string{"vfleet-cachebench", "--seconds", "3", "--min-kib", "4", "--max-kib", "65536"}},
		{"lame", Params{"audio_seconds": "30"}, 3 * time.Second, []string{"vfleet-encode", "--audio-seconds", "30", "--", "lame", "-h"}},
		{"fio", Params{"rw": "write", "bs": "1M"}, 3 * time.Second, []string{"fio", "--name=vfleet-write", "--filename=vfleet-fio.dat",
			"--rw=write", "--bs=1M", "--size=128M", "--direct=1", "--ioengine=psync", "--iodepth=1",
			"--time_based", "--runtime=3", "--unlink=1", "--output-format=json"}},
	} {
		w := mustLookup(t, tc.workload)
		ex, err := w.Command(merge(w.Defaults(), tc.params), tc.d)
		if err != nil {
			t.Fatalf("%s: %v", tc.workload, err)
		}
		if !reflect.DeepEqual(ex.Argv, tc.want) {
			t.Errorf("%s argv:\n got %q\nwant %q", tc.workload, ex.Argv, tc.want)
		}
		if ex.Timeout <= tc.d {
			t.Errorf("%s: timeout %s does not leave room beyond the duration %s", tc.workload, ex.Timeout, tc.d)
		}
	}
}

func merge(a, b Params) Params {
	out := Params{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func TestValidateRejectsBadParams(t *testing.T) {
	for _, tc := range []struct {
		workload string
		params   Params
		mention  string
	}{
		{"cpu", Params{"threads": "0"}, "threads"},
		{"cpu", Params{"threads": "two"}, "threads"},
		{"cpu", Params{"thread": "1"}, `no parameter "thread"`},
		{"fio", Params{"rw": "trim"}, "allowed: randread, randwrite, read, write"},
		{"fio", Params{"bs": "4 KiB"}, "bs"},
		{"fio", Params{"direct": "yes"}, "direct"},
		{"memory", Params{"instances": "-1"}, "instances"},
		{"stream", Params{"threads": "0"}, "or all: one per CPU"},
		{"stream", Params{"array_mib": "8"}, "from 16 to 65536 (or auto"},
		{"ctxswitch-pinned", Params{"placement": "both"}, "allowed: same, split"},
		{"cachebench", Params{"min_kib": "6"}, "min_kib = 6: want a power of two"},
		{"cachebench", Params{"max_kib": "8388608"}, "max_kib"},
		{"cachebench", Params{"min_kib": "128", "max_kib": "64"}, "min_kib = 128 is larger than max_kib = 64"},
		{"lame", Params{"audio_seconds": "0"}, "audio_seconds"},
	} {
		w := mustLookup(t, tc.workload)
		err := w.Validate(merge(w.Defaults(), tc.params))
		if !errors.Is(err, ErrBadParam) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%s %v: err = %v, want ErrBadParam mentioning %q", tc.workload, tc.params, err, tc.mention)
		}
	}
	for _, name := range Names() {
		w := mustLookup(t, name)
		if name == "command" || name == "net-command" {
			continue // it has no program until the user names one
		}
		if err := w.Validate(w.Defaults()); err != nil {
			t.Errorf("%s: defaults do not validate: %v", name, err)
		}
	}
}

func TestMemoryRefusesTooShortADuration(t *testing.T) {
	w := mustLookup(t, "memory")
	if _, err := w.Command(w.Defaults(), 5*time.Second); !errors.Is(err, ErrBadParam) {
		t.Fatalf("err = %v, want ErrBadParam", err)
	}
	if md, ok := w.(MinDurationer); !ok || md.MinDuration() != 8*time.Second {
		t.Fatal("memory must declare its minimum duration for scenario validation")
	}
}

func TestLookupUnknown(t *testing.T) {
	if _, err := Lookup("nope"); !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "cpu") {
		t.Fatalf("err = %v", err)
	}
}

func TestFioRefusesSizesItCannotUse(t *testing.T) {
	w, err := Lookup("fio")
	if err != nil {
		t.Fatal(err)
	}
	for params, want := range map[string]string{
		"bs=99999999999999999999999": "want at most 256M",
		"bs=512M":                    "want at most 256M",
		"size=2048G":                 "want at most 1024G",
		"bs=1M size=64k":             "larger than size",
		"bs=1000":                    "multiple of 512",
		"bs=4k":                      "",
		"bs=1000 direct=0":           "",
	} {
		p := w.Defaults()
		for _, kv := range strings.Fields(params) {
			k, v, _ := strings.Cut(kv, "=")
			p[k] = v
		}
		err := w.Validate(p)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", params, err)
		case want != "" && (!errors.Is(err, ErrBadParam) || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want ErrBadParam saying %q", params, err, want)
		}
	}
}

// LAME's work is the input's length, not the duration: its time limit
// lets the encoder run as slowly as the audio plays (an emulated guest)
// beyond the usual limit, and the encoder is a program the step needs.
func TestLameTimeLimitCoversTheInput(t *testing.T) {
	w := mustLookup(t, "lame")
	for audio, want := range map[string]time.Duration{"60": timeoutFor(3*time.Second) + time.Minute, "600": timeoutFor(3*time.Second) + 10*time.Minute} {
		ex, err := w.Command(Params{"audio_seconds": audio}, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if ex.Timeout != want || !reflect.DeepEqual(ex.Runs, []string{"lame"}) {
			t.Errorf("audio %s s: timeout %s, runs %q; want %s, [lame]", audio, ex.Timeout, ex.Runs, want)
		}
	}
}
