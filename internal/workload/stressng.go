package workload

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/vfleet/vfleet/internal/workload/programs"
)

// stressng runs one stress-ng stressor with metrics and picks figures out of
// its "metrc" lines. stress-ng logs to stderr.
type stressng struct {
	name, stressor string
	minDuration    time.Duration
	// The bogo-ops rate is always reported as rateMetric; misc are the
	// stressor's own "miscellaneous metrics" lines.
	rateMetric string
	rateUnit   string
	misc       []miscMetric
}

type miscMetric struct {
	phrase string // text after the value, e.g. "memory read rate (MB per sec)"
	sample Sample // Value is filled in
}

func init() {
	// memory: stress-ng's stream stressor runs the four STREAM kernels (copy,
	// scale, add, triad) over arrays four times the last-level cache, and
	// reports the read and write bandwidth over all of them together. It
	// reports nothing unless its loop ran 4.5 s after the arrays were set
	// up, which takes a second or two on a busy host: hence 8 s at least.
	Register(stressng{
		name: "memory", stressor: "stream", minDuration: 8 * time.Second,
		rateMetric: "stream_ops_per_sec", rateUnit: "ops/s",
		misc: []miscMetric{
			{phrase: "memory read rate (MB per sec)", sample: Sample{Metric: "read_bw", Unit: "MB/s", Better: HigherIsBetter}},
			{phrase: "memory write rate (MB per sec)", sample: Sample{Metric: "write_bw", Unit: "MB/s", Better: HigherIsBetter}},
			{phrase: "memory rate (Mflop per sec)", sample: Sample{Metric: "mflops", Unit: "Mflop/s", Better: HigherIsBetter}},
		},
	})
	// ctxswitch: two processes ping-pong a byte over a pipe, forcing a
	// context switch per message.
	Register(stressng{
		name: "ctxswitch", stressor: "switch",
		rateMetric: "switch_ops_per_sec", rateUnit: "ops/s",
		misc: []miscMetric{
			{phrase: "nanosecs per context switch", sample: Sample{Metric: "switch_latency", Unit: "ns", Better: LowerIsBetter}},
		},
	})
	// syscall: stress-ng's sysinfo stressor calls sysinfo, statfs, fstatfs,
	// times and uname in a loop. They only read, and nearly all of its time
	// is spent in the kernel, so it is where the cost a seccomp filter adds
	// to every system call, and a VM's exits, show first.
	Register(stressng{
		name: "syscall", stressor: "sysinfo",
		rateMetric: "syscall_ops_per_sec", rateUnit: "ops/s",
	})
}

func (w stressng) Name() string { return w.name }
func (stressng) Programs() []Program {
	return []Program{programs.StressNG}
}

func (stressng) Defaults() Params { return Params{"instances": "1"} }

func (w stressng) MinDuration() time.Duration { return w.minDuration }

func (w stressng) Validate(p Params) error {
	if err := checkKeys(w, p); err != nil {
		return err
	}
	_, err := intParam(p, "instances", 1, 1024)
	return err
}

func (w stressng) Command(p Params, d time.Duration) (Exec, error) {
	if err := w.Validate(p); err != nil {
		return Exec{}, err
	}
	if d < w.minDuration {
		return Exec{}, fmt.Errorf("%w: %s needs a duration of at least %s (got %s)", ErrBadParam, w.name, w.minDuration, d)
	}
	return Exec{
		Argv:    []string{"stress-ng", "--" + w.stressor, p["instances"], "--timeout", fmt.Sprintf("%ds", seconds(d)), "--metrics"},
		Timeout: timeoutFor(d),
	}, nil
}

func (w stressng) Parse(stdout, stderr []byte) ([]Sample, error) {
	out := append(append([]byte{}, stdout...), stderr...)
	var samples []Sample
	found := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		_, rest, ok := strings.Cut(sc.Text(), "metrc: [")
		if !ok {
			continue
		}
		_, rest, _ = strings.Cut(rest, "] ")
		fields := strings.Fields(rest)
		if len(fields) < 2 || fields[0] != w.stressor {
			continue
		}
		if rate, ok := bogoRate(fields); ok && !found[w.rateMetric] {
			found[w.rateMetric] = true
			samples = append(samples, Sample{Metric: w.rateMetric, Unit: w.rateUnit, Value: rate, Better: HigherIsBetter})
			continue
		}
		text := strings.Join(fields[2:], " ")
		for _, m := range w.misc {
			if strings.HasPrefix(text, m.phrase) && !found[m.sample.Metric] {
				v, err := parseFinite(fields[1])
				if err != nil {
					return nil, fmt.Errorf("%w: stress-ng %s: %q: %v", ErrParse, w.stressor, sc.Text(), err)
				}
				s := m.sample
				s.Value = v
				found[s.Metric] = true
				samples = append(samples, s)
			}
		}
	}
	var missing []string
	if !found[w.rateMetric] {
		missing = append(missing, "bogo ops/s")
	}
	for _, m := range w.misc {
		if !found[m.sample.Metric] {
			missing = append(missing, m.phrase)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: stress-ng %s did not report %s (%s)", ErrParse, w.stressor, strings.Join(missing, ", "), lastOwnMessage(out, w.stressor))
	}
	return samples, nil
}

// bogoRate reads the main metrics row: stressor, bogo ops, real, usr and sys
// time, then bogo ops/s over real time.
func bogoRate(fields []string) (float64, bool) {
	if len(fields) < 6 {
		return 0, false
	}
	if _, err := strconv.ParseUint(fields[1], 10, 64); err != nil {
		return 0, false
	}
	v, err := parseFinite(fields[5])
	return v, err == nil
}

// parseFinite reads a figure, refusing NaN and the infinities, which
// ParseFloat accepts ("nan", "inf") but no measurement yields.
func parseFinite(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
		return 0, fmt.Errorf("%q is not a finite number", s)
	}
	return v, err
}

// lastOwnMessage finds the stressor's last log line ("stream: run duration
// too short to determine memory rate"), the most useful thing to show when
// figures are missing; failing that, stress-ng's last line.
func lastOwnMessage(out []byte, stressor string) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if _, msg, ok := strings.Cut(lines[i], "] "+stressor+": "); ok {
			return stressor + ": " + msg
		}
	}
	return excerpt([]byte(lines[len(lines)-1]))
}
