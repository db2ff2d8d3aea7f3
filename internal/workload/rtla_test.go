package workload

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// The recordings are rtla 6.1.192 (Debian 12's rtla package, as in the
// guest image) with the argv Command builds:
//
//	rt-vm       in a 2-vCPU microVM under emulation, booted with vfleet's
//	            rt kernel flavour (Debian's 6.1 PREEMPT_RT kernel), 5 s
//	no-tracer   on a 6.18 host kernel built without the tracers (period-:
//	            timerlat with -p, which fails on setting it first)
//	container   in a runc container with the default profile
//
// The wanted figures were worked out from the recorded text separately.
func TestTimerlatSplitsIRQFromThread(t *testing.T) {
	stdout, stderr := recorded(t, "rtla-timerlat-hist-rt-vm")
	samples, err := timerlat{}.Parse(stdout, stderr)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Sample{}
	for _, s := range samples {
		got[s.Metric] = s
	}
	// Both CPUs' columns: 1250 + 1232 wake-ups of each kind, none over.
	for _, kind := range []string{"irq", "thread"} {
		dist := got["timerlat."+kind+"_us"]
		if dist.Hist == nil || dist.Hist.Count() != 2482 {
			t.Fatalf("%s histogram = %v, want 2482 wake-ups", kind, dist.Hist)
		}
		if m := got["timerlat."+kind+"_us.max"].Value; m != 7312 {
			t.Errorf("%s max = %v, want CPU 1's 7312 us", kind, m)
		}
		if p99 := got["timerlat."+kind+"_us.p99"].Value; p99 < 3200 || p99 > 7312 {
			t.Errorf("%s p99 = %v", kind, p99)
		}
	}
	// Under emulation the IRQ and the thread columns are the same: the
	// interrupt is all of the delay, the scheduler none.
	if s := got["timerlat.sched_us.p99"].Value; s != 0 {
		t.Errorf("scheduling share of the p99 = %v, want 0", s)
	}
}

func TestTimerlatBucketsMustAddUp(t *testing.T) {
	stdout, stderr := recorded(t, "rtla-timerlat-hist-rt-vm")
	cut := strings.Replace(string(stdout), "3001          4         4         4         4 \n", "", 1)
	if _, err := (timerlat{}).Parse([]byte(cut), stderr); !errors.Is(err, ErrParse) || !strings.Contains(err.Error(), "count says") {
		t.Fatalf("a histogram missing a line parsed: %v", err)
	}
}

func TestOsnoiseSumsTheCPUsBySource(t *testing.T) {
	stdout, stderr := recorded(t, "rtla-osnoise-top-rt-vm")
	samples, err := osnoise{}.Parse(stdout, stderr)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, s := range samples {
		got[s.Metric] = s.Value
	}
	runtime := 5000287.0 + 5000066
	want := map[string]float64{
		"osnoise.noise_pct":         100 * (1025829.0 + 1090834) / runtime,
		"osnoise.max_noise_us":      548913,
		"osnoise.max_single_us":     23712,
		"osnoise.hw_per_cpu_s":      (4389.0 + 5806) / (runtime / 1e6),
		"osnoise.nmi_per_cpu_s":     0,
		"osnoise.irq_per_cpu_s":     (1199.0 + 1209) / (runtime / 1e6),
		"osnoise.softirq_per_cpu_s": 0,
		"osnoise.thread_per_cpu_s":  (176.0 + 179) / (runtime / 1e6),
	}
	for m, v := range want {
		if math.Abs(got[m]-v) > 1e-9*math.Max(1, v) {
			t.Errorf("%s = %v, want %v", m, got[m], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("samples %v, want %d", got, len(want))
	}
}

// A kernel without the tracer is said to be one, for both, and the
// runner can tell it from a failure.
func TestRTLASaysWhichKernelLacksTheTracer(t *testing.T) {
	for _, c := range []struct {
		w         Workload
		recording string
		says      string
	}{
		{timerlat{}, "rtla-timerlat-no-tracer", "this kernel has no timerlat tracer"},
		{timerlat{}, "rtla-timerlat-period-no-tracer", "this kernel has no timerlat tracer"},
		{osnoise{}, "rtla-osnoise-no-tracer", "this kernel has no osnoise tracer"},
		{timerlat{}, "rtla-timerlat-container", "security: privileged"},
		{osnoise{}, "rtla-osnoise-container", "security: privileged"},
	} {
		stdout, stderr := recorded(t, c.recording)
		err := c.w.(Explainer).Explain(stdout, stderr)
		if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v", c.recording, err)
		}
		if _, err := c.w.Parse(stdout, stderr); !errors.Is(err, ErrNotSupported) {
			t.Errorf("%s parse: %v", c.w.Name(), err)
		}
	}
}

func TestRTLACommands(t *testing.T) {
	ex, err := timerlat{}.Command(Params{"period": "500", "priority": "90", "cpus": "1-3"}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ex.Argv, " "); got != "rtla timerlat hist -d 10s -p 500 -P f:90 -E 10000 -c 1-3" {
		t.Errorf("timerlat argv %q", got)
	}
	if (timerlat{}).RTPriority(Params{"priority": "90"}) != 90 {
		t.Error("timerlat's threads are not given their priority in a container")
	}
	ex, err = osnoise{}.Command(osnoise{}.Defaults(), 3*time.Second)
	if err != nil || strings.Join(ex.Argv, " ") != "rtla osnoise top -q -d 3s" {
		t.Errorf("osnoise argv %q, %v", ex.Argv, err)
	}
	for _, p := range []Params{
		{"period": "50", "priority": "95", "cpus": "all"},
		{"period": "1000", "priority": "0", "cpus": "all"},
		{"period": "1000", "priority": "95", "cpus": "1;reboot"},
	} {
		if err := (timerlat{}).Validate(p); !errors.Is(err, ErrBadParam) {
			t.Errorf("timerlat %v: %v", p, err)
		}
	}
	if err := (osnoise{}).Validate(Params{"cpus": "0-"}); !errors.Is(err, ErrBadParam) {
		t.Errorf("osnoise cpus 0-: %v", err)
	}
}
