package workload

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/stats"
)

// The recordings are cyclictest 2.4 (rt-tests 2.4-1, as in the guest image)
// run as root on a 2-CPU virtual machine with the argv Command builds:
//
//	pinned      defaults with cpu 1, 3 s
//	2threads    threads 2, mlock false, 3 s
//	busy        defaults with cpu 1, 2 s, while a shell busy loop spun on CPU 1
//	busy-other  as busy with priority 0: SCHED_OTHER against the loop
//
// The wanted figures were worked out from the recorded text separately:
// percentiles by nearest rank over every wake-up, overflows at the
// thread's maximum, the mean as the buckets' mean when nothing overflowed.
var timerCases = []struct {
	recording        string
	count, overflows uint64
	min, max, mean   float64
	p50, p99, p999   float64
}{
	{"cyclictest-pinned", 2953, 0, 16, 9003, 70.63189976295293, 41, 266, 7214},
	{"cyclictest-2threads", 5888, 0, 13, 9784, 79.89419157608695, 37, 694, 5219},
	{"cyclictest-busy", 1996, 0, 8, 2244, 46.40380761523046, 29, 535, 1169},
	// Ten wake-ups overflowed: the mean is cyclictest's, cut to a whole
	// microsecond, and the p999 is the maximum they were counted at.
	{"cyclictest-busy-other", 1264, 10, 18, 52500, 746, 86, 8487, 52500},
}

func TestTimerLatencyParsesRecordings(t *testing.T) {
	w := mustLookup(t, "timer-latency")
	for _, tc := range timerCases {
		t.Run(tc.recording, func(t *testing.T) {
			samples, err := w.Parse(recorded(t, tc.recording))
			if err != nil {
				t.Fatal(err)
			}
			var metrics []string
			for _, s := range samples {
				metrics = append(metrics, s.Metric)
				if s.Better != LowerIsBetter {
					t.Errorf("%s: better = %q", s.Metric, s.Better)
				}
			}
			want := "timer.latency_us,timer.latency_us.p99,timer.latency_us.p999,timer.latency_us.min," +
				"timer.latency_us.mean,timer.latency_us.max,timer.overflows"
			if got := strings.Join(metrics, ","); got != want {
				t.Fatalf("metrics = %s", got)
			}
			h := samples[0].Hist
			if h == nil || h.Unit() != "us" || samples[0].Unit != "us" {
				t.Fatalf("the median sample must carry the distribution in us: %+v", samples[0])
			}
			if h.Count() != tc.count {
				t.Errorf("histogram holds %d wake-ups, want %d (in range and overflowed)", h.Count(), tc.count)
			}
			if h.Max() != tc.max {
				t.Errorf("histogram max = %v, want %v: overflows go at the thread's maximum", h.Max(), tc.max)
			}
			exact := map[string]float64{
				"timer.latency_us.min": tc.min, "timer.latency_us.max": tc.max,
				"timer.latency_us.mean": tc.mean, "timer.overflows": float64(tc.overflows),
			}
			for m, v := range exact {
				if got := find(samples, m); math.Abs(got-v) > 1e-9 {
					t.Errorf("%s = %v, want %v", m, got, v)
				}
			}
			near := map[string]float64{"timer.latency_us": tc.p50, "timer.latency_us.p99": tc.p99, "timer.latency_us.p999": tc.p999}
			for m, v := range near {
				if got := find(samples, m); math.Abs(got-v) > v*stats.HistogramRelError {
					t.Errorf("%s = %v, want %v within %.2f%%", m, got, v, 100*stats.HistogramRelError)
				}
			}
		})
	}
}

func TestTimerLatencyFailuresSayWhatIsMissing(t *testing.T) {
	w := mustLookup(t, "timer-latency")
	for _, tc := range []struct {
		recording    string
		notPermitted bool
		mention      []string
	}{
		// cyclictest exits 0 after printing its usage for an unknown option.
		{"cyclictest-badopt", false, []string{"usage", "unrecognized option '--bogus'"}},
		// cpu 5 on a 2-CPU machine.
		{"cyclictest-badcpu", false, []string{"usage", "cpu argument 5 is out of range"}},
		// Root without CAP_SYS_NICE (as in a container); a cgroup with
		// cpu.rt_runtime_us 0 prints the very same.
		{"cyclictest-nonice", true, []string{"SCHED_FIFO", "CAP_SYS_NICE", "RLIMIT_RTPRIO", "cpu.rt_runtime_us", "priority 0"}},
		// Already SCHED_FIFO (which skips cyclictest's start-up check) but
		// without CAP_SYS_NICE: the measuring thread cannot take 95.
		{"cyclictest-prio", true, []string{"priority 95", "CAP_SYS_NICE", "RLIMIT_RTPRIO of at least 95"}},
		// RLIMIT_MEMLOCK 64 KiB and no CAP_IPC_LOCK.
		{"cyclictest-nomlock", true, []string{"Cannot allocate memory", "CAP_IPC_LOCK", "RLIMIT_MEMLOCK", "mlock: false"}},
	} {
		_, err := w.Parse(recorded(t, tc.recording))
		if !errors.Is(err, ErrParse) || errors.Is(err, ErrNotPermitted) != tc.notPermitted {
			t.Errorf("%s: err = %v, want ErrParse, ErrNotPermitted %v", tc.recording, err, tc.notPermitted)
			continue
		}
		for _, m := range tc.mention {
			if !strings.Contains(err.Error(), m) {
				t.Errorf("%s: %q does not mention %q", tc.recording, err, m)
			}
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error spans lines: %q", tc.recording, err)
		}
	}
}

// edit replaces the first occurrence of old, failing if there is none, so
// that every mutation below really changes the recording.
func edit(t *testing.T, b []byte, old, new string) []byte {
	t.Helper()
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("recording lacks %q", old)
	}
	return bytes.Replace(b, []byte(old), []byte(new), 1)
}

func TestTimerLatencyRejectsDamagedOutput(t *testing.T) {
	w := mustLookup(t, "timer-latency")
	one, stderr := recorded(t, "cyclictest-pinned")
	two, _ := recorded(t, "cyclictest-2threads")
	over, _ := recorded(t, "cyclictest-busy-other")
	for name, out := range map[string][]byte{
		"empty":                   nil,
		"unrelated":               []byte("hello\n"),
		"header only":             []byte("# Histogram\n"),
		"no summary":              one[:bytes.Index(one, []byte("# Total:"))],
		"row missing":             edit(t, one, "000005 000000\n", ""),
		"row garbled":             edit(t, one, "000041 ", "000041x"),
		"row out of order":        edit(t, one, "000005 000000\n", "000006 000000\n"),
		"row count not a number":  edit(t, one, "000005 000000\n", "000005 00000x\n"),
		"extra column":            edit(t, one, "000005 000000\n", "000005 000000\t000000\n"),
		"column missing":          edit(t, two, "000005 000000\t000000\n", "000005 000000\n"),
		"total disagrees":         edit(t, one, "# Total: 000002953", "# Total: 000002954"),
		"min disagrees":           edit(t, one, "# Min Latencies: 00016", "# Min Latencies: 00015"),
		"max disagrees":           edit(t, one, "# Max Latencies: 09003", "# Max Latencies: 09004"),
		"mean disagrees":          edit(t, one, "# Avg Latencies: 00070", "# Avg Latencies: 00071"),
		"overflow below range":    edit(t, over, "# Max Latencies: 52500", "# Max Latencies: 09999"),
		"overflow count missing":  edit(t, one, "# Histogram Overflows: 00000\n", "# Histogram Overflows:\n"),
		"summary figure garbled":  edit(t, one, "# Min Latencies: 00016", "# Min Latencies: -0016"),
		"overflow list missing":   edit(t, one, "# Histogram Overflow at cycle number:\n# Thread 0:\n", ""),
		"overflow list of other":  edit(t, two, "# Thread 1:", "# Thread 3:"),
		"summary of three thread": edit(t, two, "# Total: 000002960 000002928", "# Total: 000002960 000002928 000000001"),
	} {
		if _, err := w.Parse(out, stderr); !errors.Is(err, ErrParse) {
			t.Errorf("%s: err = %v, want ErrParse", name, err)
		}
	}

	// A thread that never woke up measured nothing.
	idle := []byte("# Histogram\n000000 000000\n000001 000000\n# Total: 000000000\n# Min Latencies: 1000000\n" +
		"# Avg Latencies: 00000\n# Max Latencies: 00000\n# Histogram Overflows: 00000\n" +
		"# Histogram Overflow at cycle number:\n# Thread 0:\n\n")
	if _, err := w.Parse(idle, nil); !errors.Is(err, ErrParse) || !strings.Contains(err.Error(), "no wake-up") {
		t.Errorf("idle thread: err = %v", err)
	}
}

// Output cut anywhere (at the agent's limit, say) is an error; only the
// final empty line may go without losing anything.
func TestTimerLatencyCutOutput(t *testing.T) {
	w := mustLookup(t, "timer-latency")
	for _, rec := range []string{"cyclictest-2threads", "cyclictest-busy-other"} {
		out, stderr := recorded(t, rec)
		full, err := w.Parse(out, stderr)
		if err != nil {
			t.Fatal(err)
		}
		// Through the rows now and then; in the summary at, just before
		// and just after every line's end.
		summary := bytes.Index(out, []byte("# Total:"))
		var cuts []int
		for n := 0; n < summary; n += 9973 {
			cuts = append(cuts, n)
		}
		for n := summary - 20; n < len(out); n++ {
			if out[n] == '\n' {
				cuts = append(cuts, n-1, n, n+1)
			}
		}
		for _, n := range cuts {
			if n >= len(out) {
				continue
			}
			got, err := w.Parse(out[:n], stderr)
			if n == len(out)-1 && err == nil && reflect.DeepEqual(got, full) {
				continue
			}
			if !errors.Is(err, ErrParse) {
				t.Errorf("%s cut to %d of %d bytes: err = %v, want ErrParse", rec, n, len(out), err)
			}
		}
	}
}

func TestTimerLatencyCommand(t *testing.T) {
	w := mustLookup(t, "timer-latency")
	for _, tc := range []struct {
		params Params
		d      time.Duration
		want   string
	}{
		// The argv of the pinned and busy recordings.
		{Params{"cpu": "1"}, 3 * time.Second, "cyclictest --quiet --default-system --duration=3 --interval=1000 --threads=1 " +
			"--affinity=1 --mlockall --policy=fifo --priority=95 --histogram=10000"},
		{Params{"threads": "2", "mlock": "false"}, 2500 * time.Millisecond, "cyclictest --quiet --default-system --duration=3 " +
			"--interval=1000 --threads=2 --policy=fifo --priority=95 --histogram=10000"},
		// Any --priority, even 0, would mean SCHED_FIFO to cyclictest.
		{Params{"priority": "0", "interval": "200"}, 10 * time.Second, "cyclictest --quiet --default-system --duration=10 " +
			"--interval=200 --threads=1 --mlockall --policy=other --histogram=10000"},
	} {
		ex, err := w.Command(merge(w.Defaults(), tc.params), tc.d)
		if err != nil {
			t.Fatalf("%v: %v", tc.params, err)
		}
		if got := strings.Join(ex.Argv, " "); got != tc.want {
			t.Errorf("%v argv:\n got %s\nwant %s", tc.params, got, tc.want)
		}
		if ex.Timeout <= tc.d {
			t.Errorf("%v: timeout %s leaves no room beyond %s", tc.params, ex.Timeout, tc.d)
		}
	}
	if _, err := w.Command(merge(w.Defaults(), Params{"mlock": "yes"}), time.Second); !errors.Is(err, ErrBadParam) {
		t.Errorf("Command with a bad parameter: err = %v", err)
	}
}

// The agent must keep the whole histogram, or Parse fails on a cut one.
func TestTimerLatencyAsksForRoomForItsHistogram(t *testing.T) {
	w := mustLookup(t, "timer-latency")
	for _, tc := range []struct {
		recording string
		threads   string
	}{{"cyclictest-pinned", "1"}, {"cyclictest-2threads", "2"}, {"cyclictest-busy-other", "1"}} {
		out, _ := recorded(t, tc.recording)
		ex, err := w.Command(merge(w.Defaults(), Params{"threads": tc.threads}), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(out)) > ex.MaxOutput || ex.MaxOutput < agent.MaxOutput {
			t.Errorf("%s: %d bytes of output, MaxOutput %d", tc.recording, len(out), ex.MaxOutput)
		}
	}
	ex, err := w.Command(merge(w.Defaults(), Params{"threads": "128"}), time.Second)
	if err != nil || ex.MaxOutput > agent.MaxOutputLimit || ex.MaxOutput <= agent.MaxOutput {
		t.Errorf("128 threads: MaxOutput %d, err %v: want above the default, within what the agent grants", ex.MaxOutput, err)
	}
}

func TestTimerLatencyValidate(t *testing.T) {
	w := mustLookup(t, "timer-latency")
	for _, tc := range []struct {
		params  Params
		mention string
	}{
		{Params{"priority": "-1"}, "priority = \"-1\": want a whole number from 0 to 99"},
		{Params{"priority": "100"}, "priority"},
		{Params{"priority": "high"}, "priority"},
		{Params{"interval": "10"}, "interval = \"10\": want a whole number from 50 to 1000000"},
		{Params{"interval": "1ms"}, "interval"},
		{Params{"threads": "0"}, "threads = \"0\": want a whole number from 1 to 128"},
		{Params{"threads": "129"}, "threads"},
		{Params{"cpu": "-1"}, `cpu = "-1": want "any" or a CPU number from 0 to 1023`},
		{Params{"cpu": "1024"}, "cpu"},
		{Params{"cpu": "01"}, "cpu"},
		{Params{"cpu": "0-3"}, "cpu"},
		{Params{"cpu": "all"}, "cpu"},
		{Params{"mlock": "yes"}, "mlock = \"yes\": allowed: true, false"},
		{Params{"policy": "fifo"}, `no parameter "policy" (known: cpu, interval, mlock, priority, threads)`},
	} {
		err := w.Validate(merge(w.Defaults(), tc.params))
		if !errors.Is(err, ErrBadParam) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%v: err = %v, want ErrBadParam mentioning %q", tc.params, err, tc.mention)
		}
	}
	for _, ok := range []Params{{"priority": "0"}, {"priority": "99"}, {"cpu": "0"}, {"cpu": "1023"}, {"threads": "128"}, {"mlock": "false"}} {
		if err := w.Validate(merge(w.Defaults(), ok)); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
}
