package workload

import (
	"bytes"
	"errors"
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

// timerLatency measures how late a sleeping thread wakes up: cyclictest's
// threads sleep until an absolute deadline every interval and record, at
// each wake-up, how far past the deadline they got to run. The delay is
// the sum of timer interrupt handling, the scheduler's wake-up path and
// whatever kept the CPU from the thread — the costs an isolation layer
// (a hypervisor's timer emulation, vCPU preemption, cgroup throttling)
// adds to.
type timerLatency struct{}

func init() { Register(timerLatency{}) }

func (timerLatency) Name() string { return "timer-latency" }
func (timerLatency) Programs() []Program {
	return []Program{programs.Cyclictest}
}

func (timerLatency) Defaults() Params {
	return Params{"priority": "95", "interval": "1000", "threads": "1", "cpu": "any", "mlock": "true"}
}

// ErrNotPermitted is wrapped (with ErrParse) when the tool stopped because
// the guest does not allow what the measurement needs, such as real-time
// scheduling or locked memory. The message names the capability or
// setting; the fix is in the guest's configuration or the parameters, not
// in the tool.
var ErrNotPermitted = errors.New("not permitted in the guest")

const (
	// cyclictestHistRange is the histogram's size in 1-us buckets: wake-ups
	// 10 ms or more late are only counted as overflows. 10 ms holds a whole
	// scheduler time slice, so only a thread kept off its CPU for longer
	// than a slice overflows; a wider range costs output (one line per
	// bucket) and locked memory (two arrays of 8-byte counters per thread).
	cyclictestHistRange = 10_000
	// Bounds of the parameters. Below 50 us a wake-up rate of 20,000/s
	// per thread makes the measuring load itself the disturbance.
	cyclictestMinInterval = 50
	cyclictestMaxInterval = 1_000_000
	cyclictestMaxThreads  = 128
	cyclictestMaxCPU      = 1023 // CPU_SETSIZE - 1, the largest CPU the affinity calls take
)

// RTPriority is the SCHED_FIFO priority of the measuring threads, and at
// least 1: cyclictest checks that it may use SCHED_FIFO even when told to
// run at priority 0.
func (timerLatency) RTPriority(p Params) int {
	prio, _ := strconv.Atoi(p["priority"])
	return max(prio, 1)
}

func (w timerLatency) Validate(p Params) error {
	if err := checkKeys(w, p); err != nil {
		return err
	}
	if _, err := intParam(p, "priority", 0, 99); err != nil {
		return err
	}
	if _, err := intParam(p, "interval", cyclictestMinInterval, cyclictestMaxInterval); err != nil {
		return err
	}
	if _, err := intParam(p, "threads", 1, cyclictestMaxThreads); err != nil {
		return err
	}
	if p["cpu"] != "any" {
		if n, err := strconv.Atoi(p["cpu"]); err != nil || n < 0 || n > cyclictestMaxCPU || p["cpu"] != strconv.Itoa(n) {
			return fmt.Errorf("%w: cpu = %q: want \"any\" or a CPU number from 0 to %d", ErrBadParam, Clip(p["cpu"]), cyclictestMaxCPU)
		}
	}
	_, err := enumParam(p, "mlock", "true", "false")
	return err
}

// Command runs cyclictest quietly for the duration and has it print its
// histogram on exit.
//
// --default-system keeps cyclictest from writing 0 to /dev/cpu_dma_latency,
// which would hold every CPU of the machine out of deep idle states while
// it runs. Only guests that see that device (the host baseline) could do
// it, so the baseline would be measured on a tuned machine and the other
// guests on an untuned one; without the tuning every guest measures the
// machine as it is.
//
// Priority 0 is asked for as --policy=other with no --priority: cyclictest
// reads any --priority, even 0, as a request for SCHED_FIFO.
func (w timerLatency) Command(p Params, d time.Duration) (Exec, error) {
	if err := w.Validate(p); err != nil {
		return Exec{}, err
	}
	argv := []string{"cyclictest", "--quiet", "--default-system",
		"--duration=" + strconv.Itoa(seconds(d)),
		"--interval=" + p["interval"], "--threads=" + p["threads"]}
	if p["cpu"] != "any" {
		argv = append(argv, "--affinity="+p["cpu"])
	}
	if p["mlock"] == "true" {
		argv = append(argv, "--mlockall")
	}
	if p["priority"] == "0" {
		argv = append(argv, "--policy=other")
	} else {
		argv = append(argv, "--policy=fifo", "--priority="+p["priority"])
	}
	argv = append(argv, "--histogram="+strconv.Itoa(cyclictestHistRange))
	threads, _ := strconv.Atoi(p["threads"])
	return Exec{Argv: argv, Timeout: timeoutFor(d), MaxOutput: cyclictestOutput(threads)}, nil
}

// cyclictestOutput is the stdout room the histogram needs: a line per
// bucket with a column per thread, then for each thread the cycle numbers
// of up to cyclictestHistRange overflows. Counts and cycle numbers are
// given room for 11 digits, which a week-long run would not reach.
func cyclictestOutput(threads int) int64 {
	const field = 12 // a separator and a figure of up to 11 digits
	rows := int64(cyclictestHistRange) * int64(8+field*threads)
	overflowLists := int64(threads) * int64(cyclictestHistRange*field+64)
	const summary = 64 << 10
	n := rows + overflowLists + summary
	return max(min(n, agent.MaxOutputLimit), agent.MaxOutput)
}

var (
	// check_privs() in cyclictest 2.4 tries SCHED_FIFO at start, whatever
	// the requested policy, and exits with this when it may not.
	cyclictestNoFIFORE = regexp.MustCompile(`Unable to change scheduling policy!`)
	// A measuring thread that may not take its priority (above
	// RLIMIT_RTPRIO, say) stops the run with this.
	cyclictestPrioRE     = regexp.MustCompile(`failed to set priority to (-?[0-9]+)`)
	cyclictestMlockRE    = regexp.MustCompile(`(?m)^mlockall: (.*)$`)
	cyclictestFatalRE    = regexp.MustCompile(`(?m)^FATAL: (.*)$`)
	cyclictestThreadLnRE = regexp.MustCompile(`^# Thread ([0-9]+):`)
)

// cyclictestThread is one measuring thread's part of the histogram output.
type cyclictestThread struct {
	buckets                  []uint64 // buckets[k]: wake-ups k to k+1 us late
	total                    uint64   // in-range wake-ups, as cyclictest counted them
	min, avg, max, overflows uint64
}

// Parse reads the histogram cyclictest prints on exit (-h): one line per
// 1-us bucket with a column per thread, then per-thread totals, minimum,
// mean, maximum and overflow counts. Every wake-up of every thread goes
// into one stats.Histogram; a wake-up beyond the histogram's range is
// counted there at its thread's maximum, the only value cyclictest keeps
// for it, so the tail stays in the distribution (as an upper bound).
func (timerLatency) Parse(stdout, stderr []byte) ([]Sample, error) {
	if err := cyclictestFailure(stdout, stderr); err != nil {
		return nil, err
	}
	threads, err := parseCyclictestHist(stdout)
	if err != nil {
		if len(bytes.TrimSpace(stderr)) > 0 {
			return nil, fmt.Errorf("%w; stderr: %s", err, excerpt(stderr))
		}
		return nil, err
	}

	h := stats.NewHistogram("us")
	var sum, n float64
	var overflows uint64
	lo, hi := uint64(math.MaxUint64), uint64(0)
	for _, th := range threads {
		for k, c := range th.buckets {
			h.AddN(float64(k), c)
		}
		h.AddN(float64(th.max), th.overflows)
		overflows += th.overflows
		lo, hi = min(lo, th.min), max(hi, th.max)
		count := float64(th.total + th.overflows)
		sum += th.mean() * count
		n += count
	}

	us := func(metric string, v float64) Sample {
		return Sample{Metric: metric, Unit: "us", Value: v, Better: LowerIsBetter}
	}
	dist := us("timer.latency_us", h.Quantile(0.5))
	dist.Hist = h
	return []Sample{
		dist,
		us("timer.latency_us.p99", h.Quantile(0.99)),
		us("timer.latency_us.p999", h.Quantile(0.999)),
		us("timer.latency_us.min", float64(lo)),
		us("timer.latency_us.mean", sum/n),
		us("timer.latency_us.max", float64(hi)),
		{Metric: "timer.overflows", Unit: "wake-ups", Value: float64(overflows), Better: LowerIsBetter},
	}, nil
}

// mean is the thread's exact mean when every wake-up is in a bucket:
// cyclictest's latencies are whole microseconds, so the buckets hold them
// exactly, and its own printed mean is cut to a whole microsecond. A
// wake-up beyond the range is known only to cyclictest's sum, so then its
// (truncated) mean is the one to use.
func (th cyclictestThread) mean() float64 {
	if th.overflows > 0 {
		return float64(th.avg)
	}
	var s float64
	for k, c := range th.buckets {
		s += float64(k) * float64(c)
	}
	return s / float64(th.total)
}

// cyclictestFailure recognises the ways cyclictest stops without a
// histogram, some of them with exit status 0, and says what to change.
func cyclictestFailure(stdout, stderr []byte) error {
	switch {
	case cyclictestNoFIFORE.Match(stderr):
		return fmt.Errorf("%w: %w: cyclictest may not use SCHED_FIFO, which it checks at start even for priority 0: "+
			"the guest needs CAP_SYS_NICE (or an RLIMIT_RTPRIO of at least the priority) and, on a kernel with real-time "+
			"group scheduling, real-time runtime for its cgroup (cpu.rt_runtime_us above 0)", ErrParse, ErrNotPermitted)
	case cyclictestPrioRE.Match(stderr):
		m := cyclictestPrioRE.FindSubmatch(stderr)
		return fmt.Errorf("%w: %w: cyclictest may not run its threads at SCHED_FIFO priority %s: the guest needs CAP_SYS_NICE "+
			"or an RLIMIT_RTPRIO of at least %[3]s, and real-time runtime for its cgroup (cpu.rt_runtime_us) where the kernel has "+
			"real-time group scheduling; or lower the priority parameter", ErrParse, ErrNotPermitted, m[1])
	case cyclictestMlockRE.Match(stderr):
		m := cyclictestMlockRE.FindSubmatch(stderr)
		return fmt.Errorf("%w: %w: cyclictest could not lock its memory (mlockall: %s): mlock: true needs CAP_IPC_LOCK or an "+
			"RLIMIT_MEMLOCK above cyclictest's size in the guest; set mlock: false to measure without it", ErrParse, ErrNotPermitted, bytes.TrimSpace(m[1]))
	case bytes.Contains(stdout, []byte("\nUsage:\ncyclictest <options>\n")):
		// An unknown option or an affinity outside the machine's CPUs
		// prints the usage, with exit status 0 for the former.
		return fmt.Errorf("%w: cyclictest rejected its command line and printed its usage: %s", ErrParse, excerpt(stderr))
	case cyclictestFatalRE.Match(stderr):
		return fmt.Errorf("%w: cyclictest stopped: %s", ErrParse, bytes.TrimSpace(cyclictestFatalRE.FindSubmatch(stderr)[1]))
	}
	return nil
}

// parseCyclictestHist reads the histogram block and checks it against the
// summary lines, so that a cut or garbled output is an error, never a
// distribution with wake-ups missing.
func parseCyclictestHist(stdout []byte) ([]cyclictestThread, error) {
	text := string(stdout)
	start := strings.Index(text, "# Histogram\n")
	if start < 0 || (start > 0 && text[start-1] != '\n') {
		return nil, fmt.Errorf("%w: cyclictest: no \"# Histogram\" in the output (did it run with --histogram?): %s", ErrParse, excerpt(stdout))
	}
	lines := strings.Split(text[start+len("# Histogram\n"):], "\n")
	// The output ends with a newline; a last line without one is where
	// it was cut.
	if lines[len(lines)-1] != "" {
		return nil, fmt.Errorf("%w: cyclictest: output ends in the middle of a line (cut short?)", ErrParse)
	}
	lines = lines[:len(lines)-1]

	var threads []cyclictestThread
	i := 0
	for ; i < len(lines) && isCyclictestRow(lines[i]); i++ {
		f := strings.Fields(lines[i])
		if k, err := strconv.Atoi(f[0]); err != nil || k != i {
			return nil, fmt.Errorf("%w: cyclictest histogram: row %d is numbered %q", ErrParse, i, f[0])
		}
		if i == 0 {
			threads = make([]cyclictestThread, len(f)-1)
		}
		if len(f)-1 != len(threads) || len(threads) == 0 {
			return nil, fmt.Errorf("%w: cyclictest histogram: row %d has %d counts, want %d (one per thread)", ErrParse, i, len(f)-1, len(threads))
		}
		for t := range threads {
			c, err := strconv.ParseUint(f[t+1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%w: cyclictest histogram: row %d: count %q", ErrParse, i, f[t+1])
			}
			threads[t].buckets = append(threads[t].buckets, c)
		}
	}
	if len(threads) == 0 {
		return nil, fmt.Errorf("%w: cyclictest: \"# Histogram\" is followed by no bucket rows", ErrParse)
	}
	rest := lines[i:]

	summary := []struct {
		label string
		dst   func(*cyclictestThread) *uint64
	}{
		{"# Total:", func(t *cyclictestThread) *uint64 { return &t.total }},
		{"# Min Latencies:", func(t *cyclictestThread) *uint64 { return &t.min }},
		{"# Avg Latencies:", func(t *cyclictestThread) *uint64 { return &t.avg }},
		{"# Max Latencies:", func(t *cyclictestThread) *uint64 { return &t.max }},
		{"# Histogram Overflows:", func(t *cyclictestThread) *uint64 { return &t.overflows }},
	}
	for j, s := range summary {
		if j >= len(rest) || !strings.HasPrefix(rest[j], s.label) {
			return nil, fmt.Errorf("%w: cyclictest: no %q line after the %d histogram rows (cut short?)", ErrParse, s.label, i)
		}
		f := strings.Fields(strings.TrimPrefix(rest[j], s.label))
		if len(f) != len(threads) {
			return nil, fmt.Errorf("%w: cyclictest: %q has %d figures, want %d (one per thread)", ErrParse, rest[j], len(f), len(threads))
		}
		for t := range threads {
			v, err := strconv.ParseUint(f[t], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%w: cyclictest: %q: figure %q", ErrParse, rest[j], f[t])
			}
			*s.dst(&threads[t]) = v
		}
	}
	// The overflow cycle lists come last, a line per thread: seeing them
	// all means nothing was cut.
	rest = rest[len(summary):]
	if len(rest) < 1+len(threads) || rest[0] != "# Histogram Overflow at cycle number:" {
		return nil, fmt.Errorf("%w: cyclictest: the overflow list after the summary is missing (cut short?)", ErrParse)
	}
	for t := range threads {
		m := cyclictestThreadLnRE.FindStringSubmatch(rest[1+t])
		if m == nil || m[1] != strconv.Itoa(t) {
			return nil, fmt.Errorf("%w: cyclictest: overflow list: %q, want thread %d", ErrParse, rest[1+t], t)
		}
	}

	for t := range threads {
		if err := threads[t].check(len(threads[t].buckets)); err != nil {
			return nil, fmt.Errorf("%w: cyclictest thread %d: %v", ErrParse, t, err)
		}
	}
	return threads, nil
}

// isCyclictestRow tells a bucket row ("000042 000017\t000003") from the
// summary lines that follow, which start with '#'.
func isCyclictestRow(line string) bool {
	return len(line) > 0 && line[0] >= '0' && line[0] <= '9'
}

// check holds a thread's buckets against its summary figures; they come
// from the same wake-ups, so any difference means a misread output.
func (th cyclictestThread) check(rangeUS int) error {
	var sum uint64
	first, last := -1, -1
	for k, c := range th.buckets {
		if c > 0 {
			if first < 0 {
				first = k
			}
			last = k
		}
		sum += c
	}
	r := uint64(rangeUS)
	switch {
	case sum != th.total:
		return fmt.Errorf("buckets hold %d wake-ups, its total says %d", sum, th.total)
	case th.total+th.overflows == 0:
		return errors.New("no wake-up recorded: the thread never ran during the measurement")
	case th.total > 0 && uint64(first) != th.min:
		return fmt.Errorf("lowest bucket %d us, its minimum says %d us", first, th.min)
	case th.total == 0 && th.min < r:
		return fmt.Errorf("every wake-up overflowed, yet its minimum %d us is within the %d us range", th.min, r)
	case th.overflows == 0 && uint64(last) != th.max:
		return fmt.Errorf("highest bucket %d us, its maximum says %d us", last, th.max)
	case th.overflows > 0 && th.max < r:
		return fmt.Errorf("%d overflows, yet its maximum %d us is within the %d us range", th.overflows, th.max, r)
	case th.avg < th.min || th.avg > th.max:
		return fmt.Errorf("mean %d us outside its minimum %d and maximum %d", th.avg, th.min, th.max)
	case th.overflows == 0 && uint64(th.mean()) != th.avg:
		return fmt.Errorf("buckets average %.2f us, its (truncated) mean says %d us", th.mean(), th.avg)
	}
	return nil
}
