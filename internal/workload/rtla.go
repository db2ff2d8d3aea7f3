package workload

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/workload/programs"
)

// The kernel's latency tracers, driven by rtla: where cyclictest says how
// late a wake-up was, timerlat splits it into the interrupt's delay (the
// timer's IRQ handler, which runs first) and the thread's (the IRQ delay
// plus getting the woken thread onto the CPU: the scheduler's part), and
// osnoise says what interrupted a busy thread and how often, by source.
// Both need the tracer in the kernel that runs the guest: the host's for
// containers, the VM's own kernel for a VM (vfleet's rt kernel flavour has
// them, its cloud kernel has not).

// ErrNotSupported is wrapped when a guest cannot run a workload as it is
// built: its kernel lacks what the workload needs, or its isolation
// withholds it. The step is reported as not supported rather than failed,
// once per guest group, and progress shows it as no failure.
var ErrNotSupported error = notSupported{}

type notSupported struct{}

func (notSupported) Error() string       { return "not supported in this guest" }
func (notSupported) NotApplicable() bool { return true }

// Explainer is a workload that can tell, from what its tool printed on
// failing, a reason better than its exit status (a kernel without the
// feature it needs).
type Explainer interface {
	Explain(stdout, stderr []byte) error
}

// What rtla 6.1 says when it cannot trace: the kernel has no such tracer
// (when a timerlat period is set first, that fails instead, its file being
// the tracer's own), or tracefs is out of the guest's reach, as in a
// container, which can neither see the host's nor mount its own.
var (
	rtlaNoTracerRE  = regexp.MustCompile(`(?m)^Tracer (\w+) not found!`)
	rtlaNoPeriodRE  = regexp.MustCompile(`(?m)^Failed to set timerlat period$`)
	rtlaNoTracefsRE = regexp.MustCompile(`(?m)^Could not init osnoise (hist|top)$`)
)

// rtlaTracerConfig names the kernel option each tracer needs.
var rtlaTracerConfig = map[string]string{"timerlat": "CONFIG_TIMERLAT_TRACER", "osnoise": "CONFIG_OSNOISE_TRACER"}

func explainRTLA(stderr []byte) error {
	noTracer := func(tracer string) error {
		return fmt.Errorf("%w: this kernel has no %s tracer (%s); vfleet's VMs with kernel_flavour: rt have it",
			ErrNotSupported, tracer, rtlaTracerConfig[tracer])
	}
	switch m := rtlaNoTracerRE.FindSubmatch(stderr); {
	case m != nil:
		return noTracer(string(m[1]))
	case rtlaNoPeriodRE.Match(stderr):
		return noTracer("timerlat")
	case rtlaNoTracefsRE.Match(stderr):
		return fmt.Errorf("%w: rtla cannot reach the kernel's tracing (tracefs) from this guest; a container needs security: privileged, and the host's kernel the tracer", ErrNotSupported)
	}
	return nil
}

// Bounds shared by the two: rtla's own limits on the period are wider, but
// below 100 us the tracer's wake-ups are the disturbance.
const (
	rtlaMinPeriod = 100
	rtlaMaxPeriod = 1_000_000
	// rtlaHistEntries is timerlat's histogram range in 1-us buckets, as
	// cyclictest's: a wake-up 10 ms or more late only counts as over.
	rtlaHistEntries = 10_000
)

var cpuListRE = regexp.MustCompile(`^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$`)

func cpusParam(p Params) error {
	if p["cpus"] == "all" || cpuListRE.MatchString(p["cpus"]) {
		return nil
	}
	return fmt.Errorf("%w: cpus = %q: want \"all\" or a CPU list like 0-1,3", ErrBadParam, Clip(p["cpus"]))
}

// timerlat is rtla timerlat hist: per CPU, a timer fires every period and
// the tracer records how late its IRQ handler and its thread ran.
type timerlat struct{}

func init() { Register(timerlat{}) }

func (timerlat) Name() string { return "timerlat" }
func (timerlat) Programs() []Program {
	return []Program{programs.RTLA}
}

func (timerlat) Defaults() Params {
	return Params{"period": "1000", "priority": "95", "cpus": "all"}
}

func (timerlat) Headlines() []string {
	return []string{"timerlat.thread_us.p99", "timerlat.irq_us.p99", "timerlat.sched_us.p99"}
}

// RTPriority is the SCHED_FIFO priority of timerlat's measuring threads.
func (timerlat) RTPriority(p Params) int {
	prio, _ := strconv.Atoi(p["priority"])
	return prio
}

func (w timerlat) Validate(p Params) error {
	if err := checkKeys(w, p); err != nil {
		return err
	}
	if _, err := intParam(p, "period", rtlaMinPeriod, rtlaMaxPeriod); err != nil {
		return err
	}
	if _, err := intParam(p, "priority", 1, 99); err != nil {
		return err
	}
	return cpusParam(p)
}

func (w timerlat) Command(p Params, d time.Duration) (Exec, error) {
	if err := w.Validate(p); err != nil {
		return Exec{}, err
	}
	argv := []string{"rtla", "timerlat", "hist", "-d", strconv.Itoa(seconds(d)) + "s",
		"-p", p["period"], "-P", "f:" + p["priority"], "-E", strconv.Itoa(rtlaHistEntries)}
	if p["cpus"] != "all" {
		argv = append(argv, "-c", p["cpus"])
	}
	// A line per bucket hit, with two columns per CPU: the busiest output
	// is far below the agent's largest.
	return Exec{Argv: argv, Timeout: timeoutFor(d), MaxOutput: agent.MaxOutputLimit}, nil
}

func (timerlat) Explain(_, stderr []byte) error { return explainRTLA(stderr) }

// timerlatColumn is one CPU's IRQ or thread histogram.
type timerlatColumn struct {
	kind    string // "IRQ" or "Thr"
	buckets map[int]uint64
	over    uint64
	max     float64
	count   uint64 // as rtla counted, to check the buckets against
}

// Parse reads timerlat's histogram: a header naming IRQ-NNN and Thr-NNN
// columns, a line per 1-us bucket with a hit, then per column the
// overflows and count, min, avg and max. Each kind's buckets from every
// CPU go into one histogram; an overflow counts at its column's maximum,
// the only value rtla keeps for it, as with cyclictest.
func (timerlat) Parse(stdout, stderr []byte) ([]Sample, error) {
	if err := explainRTLA(stderr); err != nil {
		return nil, err
	}
	cols, err := parseTimerlatHist(stdout)
	if err != nil {
		if len(bytes.TrimSpace(stderr)) > 0 {
			return nil, fmt.Errorf("%w; stderr: %s", err, excerpt(stderr))
		}
		return nil, err
	}
	hists := map[string]*stats.Histogram{"IRQ": stats.NewHistogram("us"), "Thr": stats.NewHistogram("us")}
	maxOf := map[string]float64{}
	for _, c := range cols {
		h := hists[c.kind]
		for k, n := range c.buckets {
			h.AddN(float64(k), n)
		}
		h.AddN(c.max, c.over)
		maxOf[c.kind] = math.Max(maxOf[c.kind], c.max)
	}
	us := func(metric string, v float64) Sample {
		return Sample{Metric: metric, Unit: "us", Value: v, Better: LowerIsBetter}
	}
	var out []Sample
	for _, k := range []struct{ kind, name string }{{"IRQ", "irq"}, {"Thr", "thread"}} {
		h := hists[k.kind]
		if h.Count() == 0 {
			return nil, fmt.Errorf("%w: timerlat recorded no %s latency", ErrParse, k.name)
		}
		dist := us("timerlat."+k.name+"_us", h.Quantile(0.5))
		dist.Hist = h
		out = append(out, dist,
			us("timerlat."+k.name+"_us.p99", h.Quantile(0.99)),
			us("timerlat."+k.name+"_us.max", maxOf[k.kind]))
	}
	// The thread's delay includes the IRQ's; what is left at the tail is
	// the time from the handler to the thread running.
	irq99, thr99 := hists["IRQ"].Quantile(0.99), hists["Thr"].Quantile(0.99)
	return append(out, us("timerlat.sched_us.p99", math.Max(thr99-irq99, 0))), nil
}

var timerlatColRE = regexp.MustCompile(`^(IRQ|Thr)-([0-9]+)$`)

func parseTimerlatHist(stdout []byte) ([]*timerlatColumn, error) {
	var cols []*timerlatColumn
	sc := bufio.NewScanner(bytes.NewReader(stdout))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if f[0] == "Index" {
			cols = nil
			for _, name := range f[1:] {
				m := timerlatColRE.FindStringSubmatch(name)
				if m == nil {
					return nil, fmt.Errorf("%w: timerlat column %q", ErrParse, Clip(name))
				}
				cols = append(cols, &timerlatColumn{kind: m[1], buckets: map[int]uint64{}})
			}
			continue
		}
		if cols == nil {
			return nil, fmt.Errorf("%w: timerlat output has no header before %q", ErrParse, Clip(sc.Text()))
		}
		if len(f) != len(cols)+1 {
			return nil, fmt.Errorf("%w: timerlat line %q has %d values for %d columns", ErrParse, Clip(sc.Text()), len(f)-1, len(cols))
		}
		row := f[0]
		for i, c := range cols {
			v, err := strconv.ParseFloat(f[i+1], 64)
			if err != nil || v < 0 {
				return nil, fmt.Errorf("%w: timerlat line %q: value %q", ErrParse, Clip(sc.Text()), Clip(f[i+1]))
			}
			switch row {
			case "over:":
				c.over = uint64(v)
			case "count:":
				c.count = uint64(v)
			case "min:", "avg:":
			case "max:":
				c.max = v
			default:
				bucket, err := strconv.Atoi(row)
				if err != nil || bucket < 0 {
					return nil, fmt.Errorf("%w: timerlat bucket %q", ErrParse, Clip(row))
				}
				c.buckets[bucket] += uint64(v)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrParse, err)
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("%w: no timerlat histogram in the output", ErrParse)
	}
	for i, c := range cols {
		n := c.over
		for _, b := range c.buckets {
			n += b
		}
		if n != c.count {
			return nil, fmt.Errorf("%w: timerlat column %d holds %d wake-ups, its count says %d (output cut short?)", ErrParse, i+1, n, c.count)
		}
	}
	return cols, nil
}

// osnoise is rtla osnoise top: a busy thread per CPU counts every
// interruption, its length and its source (hardware, NMI, IRQ, softirq,
// another thread).
type osnoise struct{}

func init() { Register(osnoise{}) }

func (osnoise) Name() string { return "osnoise" }
func (osnoise) Programs() []Program {
	return []Program{programs.RTLA}
}

func (osnoise) Defaults() Params { return Params{"cpus": "all"} }

func (osnoise) Headlines() []string {
	return []string{"osnoise.noise_pct", "osnoise.max_single_us"}
}

func (w osnoise) Validate(p Params) error {
	if err := checkKeys(w, p); err != nil {
		return err
	}
	return cpusParam(p)
}

func (w osnoise) Command(p Params, d time.Duration) (Exec, error) {
	if err := w.Validate(p); err != nil {
		return Exec{}, err
	}
	argv := []string{"rtla", "osnoise", "top", "-q", "-d", strconv.Itoa(seconds(d)) + "s"}
	if p["cpus"] != "all" {
		argv = append(argv, "-c", p["cpus"])
	}
	return Exec{Argv: argv, Timeout: timeoutFor(d)}, nil
}

func (osnoise) Explain(_, stderr []byte) error { return explainRTLA(stderr) }

// osnoiseSources are the interference counters' columns, in rtla's order,
// after CPU, period, runtime, noise, % available, max noise, max single.
var osnoiseSources = []string{"hw", "nmi", "irq", "softirq", "thread"}

// Parse reads osnoise's table: per CPU its runtime and noise in us, the
// longest noise in one period and in one interruption, and how many
// interruptions came from each source. The CPUs are summed: the noise as
// a share of the runtime, each source as interruptions per second of
// runtime of one CPU, and the longest of the maxima.
func (osnoise) Parse(stdout, stderr []byte) ([]Sample, error) {
	if err := explainRTLA(stderr); err != nil {
		return nil, err
	}
	var runtime, noise, maxNoise, maxSingle float64
	counts := make([]float64, len(osnoiseSources))
	cpus := 0
	header := false
	// rtla colours its header even when not on a terminal (ansiRE).
	for _, line := range strings.Split(ansiRE.ReplaceAllString(string(stdout), ""), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && f[0] == "CPU" && f[1] == "Period" {
			header = true
			continue
		}
		if !header || len(f) == 0 {
			continue
		}
		// CPU, #periods, then ten numbers.
		if len(f) != 12 || !strings.HasPrefix(f[1], "#") {
			return nil, fmt.Errorf("%w: osnoise line %q", ErrParse, Clip(line))
		}
		v := make([]float64, 10)
		for i := range v {
			x, err := strconv.ParseFloat(f[i+2], 64)
			if err != nil || x < 0 {
				return nil, fmt.Errorf("%w: osnoise line %q: value %q", ErrParse, Clip(line), Clip(f[i+2]))
			}
			v[i] = x
		}
		runtime += v[0]
		noise += v[1]
		maxNoise, maxSingle = math.Max(maxNoise, v[3]), math.Max(maxSingle, v[4])
		for i := range counts {
			counts[i] += v[5+i]
		}
		cpus++
	}
	if cpus == 0 || runtime == 0 {
		if len(bytes.TrimSpace(stderr)) > 0 {
			return nil, fmt.Errorf("%w: no osnoise table; stderr: %s", ErrParse, excerpt(stderr))
		}
		return nil, fmt.Errorf("%w: no osnoise table in the output", ErrParse)
	}
	perCPUSecond := runtime / 1e6 // the runtime is in us
	out := []Sample{
		{Metric: "osnoise.noise_pct", Unit: "%", Value: 100 * noise / runtime, Better: LowerIsBetter},
		{Metric: "osnoise.max_noise_us", Unit: "us", Value: maxNoise, Better: LowerIsBetter},
		{Metric: "osnoise.max_single_us", Unit: "us", Value: maxSingle, Better: LowerIsBetter},
	}
	for i, src := range osnoiseSources {
		out = append(out, Sample{Metric: "osnoise." + src + "_per_cpu_s", Unit: "per CPU-s", Value: counts[i] / perCPUSecond, Better: LowerIsBetter})
	}
	return out, nil
}
