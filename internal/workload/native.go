package workload

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Workloads driving vfleet's own programs (package image/native), which
// every vfleet image carries, built from source for its architecture.

// stream is memory bandwidth as STREAM reports it: the best rate of each of
// its four kernels over the passes that fit the duration, with arrays at
// least four times the last-level cache. stress-ng's stream stressor
// (workload memory) reports one combined rate and, under 4.5 s of loop,
// none; this reports all four at any duration.
type stream struct{}

// pingpong is a context switch between two processes with both ends placed:
// on one CPU or on two. Unpinned (workload ctxswitch), the pair lands on
// one or two CPUs by chance and the rate swings by a factor between runs.
type pingpong struct{}

// cachebench is cache and memory bandwidth by buffer size, as CacheBench
// measures it: one thread reading, writing, and reading, modifying and
// writing back buffers from inside the first-level cache to memory. Each
// mode's figure is the mean of its rates over the sizes, the one figure
// per mode the container study (through the Phoronix Test Suite) reports.
type cachebench struct{}

func init() {
	Register(stream{})
	Register(pingpong{})
	Register(cachebench{})
}

// figure is a figure as one of vfleet's own programs names it in its
// output, and the metric it becomes.
type figure struct{ name, metric string }

// metricsOf are the metrics the figures become, in the program's order.
func metricsOf(figures []figure) []string {
	out := make([]string, len(figures))
	for i, f := range figures {
		out[i] = f.metric
	}
	return out
}

// streamKernels are STREAM's kernels as the program names them.
var streamKernels = []figure{
	{"Copy", "copy_mbps"}, {"Scale", "scale_mbps"}, {"Add", "add_mbps"}, {"Triad", "triad_mbps"},
}

func (stream) Name() string { return "stream" }

// Programs: vfleet's own, built into every image, so no Debian package.
func (stream) Programs() []Program {
	return []Program{{Name: "vfleet-stream"}}
}

// Defaults: threads "all" is one thread per CPU the guest gives the program;
// array_mib "auto" is four times the last-level cache, within half the
// memory available.
// Headlines: the consolidation study's table is STREAM's four kernels.
func (stream) Headlines() []string { return metricsOf(streamKernels) }

func (stream) Defaults() Params { return Params{"threads": "all", "array_mib": "auto"} }

func (w stream) Validate(p Params) error {
	if err := checkKeys(w, p); err != nil {
		return err
	}
	if p["threads"] != "all" {
		if _, err := intParam(p, "threads", 1, 1024); err != nil {
			return fmt.Errorf("%w (or all: one per CPU)", err)
		}
	}
	if p["array_mib"] != "auto" {
		if _, err := intParam(p, "array_mib", 16, 1<<16); err != nil {
			return fmt.Errorf("%w (or auto: four times the last-level cache)", err)
		}
	}
	return nil
}

func (w stream) Command(p Params, d time.Duration) (Exec, error) {
	if err := w.Validate(p); err != nil {
		return Exec{}, err
	}
	argv := []string{"vfleet-stream", "--seconds", strconv.FormatFloat(d.Seconds(), 'f', -1, 64)}
	if p["threads"] != "all" {
		argv = append(argv, "--threads", p["threads"])
	}
	if p["array_mib"] != "auto" {
		argv = append(argv, "--array-mib", p["array_mib"])
	}
	return Exec{Argv: argv, Timeout: timeoutFor(d)}, nil
}

func (stream) Parse(stdout, stderr []byte) ([]Sample, error) {
	rates := map[string]float64{}
	validated := false
	sc := bufio.NewScanner(bytes.NewReader(stdout))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "Validation:" {
			if f[1] != "ok," {
				return nil, fmt.Errorf("%w: vfleet-stream: results did not validate: %s", ErrParse, sc.Text())
			}
			validated = true
		}
		if len(f) != 5 {
			continue
		}
		for _, k := range streamKernels {
			if f[0] == k.name {
				v, err := parseFinite(f[1])
				if err != nil {
					return nil, fmt.Errorf("%w: vfleet-stream %s: %q: %v", ErrParse, k.name, sc.Text(), err)
				}
				rates[k.metric] = v
			}
		}
	}
	if !validated || len(rates) != len(streamKernels) {
		return nil, fmt.Errorf("%w: vfleet-stream reported %d of the 4 kernels%s: %s", ErrParse, len(rates),
			map[bool]string{true: "", false: " and no validation"}[validated], excerpt(bytes.Join([][]byte{stdout, stderr}, nil)))
	}
	out := make([]Sample, len(streamKernels))
	for i, k := range streamKernels {
		out[i] = Sample{Metric: k.metric, Unit: "MB/s", Value: rates[k.metric], Better: HigherIsBetter}
	}
	return out, nil
}

func (pingpong) Name() string { return "ctxswitch-pinned" }
func (pingpong) Programs() []Program {
	return []Program{{Name: "vfleet-pingpong"}}
}

func (pingpong) Defaults() Params { return Params{"placement": "same"} }

func (w pingpong) Validate(p Params) error {
	if err := checkKeys(w, p); err != nil {
		return err
	}
	_, err := enumParam(p, "placement", "same", "split")
	return err
}

func (w pingpong) Command(p Params, d time.Duration) (Exec, error) {
	if err := w.Validate(p); err != nil {
		return Exec{}, err
	}
	return Exec{
		Argv:    []string{"vfleet-pingpong", "--placement", p["placement"], "--seconds", strconv.FormatFloat(d.Seconds(), 'f', -1, 64)},
		Timeout: timeoutFor(d),
	}, nil
}

func (pingpong) Parse(stdout, stderr []byte) ([]Sample, error) {
	figures := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(stdout))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && (f[0] == "round_trips_per_sec" || f[0] == "ns_per_switch") {
			v, err := parseFinite(f[1])
			if err != nil {
				return nil, fmt.Errorf("%w: vfleet-pingpong: %q: %v", ErrParse, sc.Text(), err)
			}
			figures[f[0]] = v
		}
	}
	if len(figures) != 2 {
		return nil, fmt.Errorf("%w: vfleet-pingpong reported no figures: %s", ErrParse, excerpt(bytes.Join([][]byte{stdout, stderr}, nil)))
	}
	return []Sample{
		{Metric: "switch_latency", Unit: "ns", Value: figures["ns_per_switch"], Better: LowerIsBetter},
		{Metric: "round_trips_per_sec", Unit: "1/s", Value: figures["round_trips_per_sec"], Better: HigherIsBetter},
	}, nil
}

// cachebenchModes are the program's columns, in its order.
var cachebenchModes = []figure{
	{"Read", "read_mbps"}, {"Write", "write_mbps"}, {"RMW", "rmw_mbps"},
}

func (cachebench) Name() string { return "cachebench" }
func (cachebench) Programs() []Program {
	return []Program{{Name: "vfleet-cachebench"}}
}

// Headlines: the study's table has a row for each of the three modes.
func (cachebench) Headlines() []string { return metricsOf(cachebenchModes) }

// Defaults: from 4 KiB, inside any first-level data cache, to 64 MiB,
// beyond the last-level cache of most hosts.
func (cachebench) Defaults() Params { return Params{"min_kib": "4", "max_kib": "65536"} }

// maxCachebenchKiB bounds the largest buffer (4 GiB), which the guest must
// hold in memory.
const maxCachebenchKiB = 1 << 22

func (w cachebench) Validate(p Params) error {
	if err := checkKeys(w, p); err != nil {
		return err
	}
	var kib [2]int
	for i, key := range []string{"min_kib", "max_kib"} {
		v, err := intParam(p, key, 1, maxCachebenchKiB)
		if err != nil {
			return err
		}
		if v&(v-1) != 0 {
			return fmt.Errorf("%w: %s = %d: want a power of two, like 4 or 65536", ErrBadParam, key, v)
		}
		kib[i] = v
	}
	if kib[0] > kib[1] {
		return fmt.Errorf("%w: min_kib = %d is larger than max_kib = %d", ErrBadParam, kib[0], kib[1])
	}
	return nil
}

func (w cachebench) Command(p Params, d time.Duration) (Exec, error) {
	if err := w.Validate(p); err != nil {
		return Exec{}, err
	}
	return Exec{
		Argv: []string{"vfleet-cachebench", "--seconds", strconv.FormatFloat(d.Seconds(), 'f', -1, 64),
			"--min-kib", p["min_kib"], "--max-kib", p["max_kib"]},
		Timeout: timeoutFor(d),
	}, nil
}

// Parse reads the mean over the sizes, the line that ends the table, once
// the program has checked what every pass left in the buffer.
func (cachebench) Parse(stdout, stderr []byte) ([]Sample, error) {
	var mean []string
	validated := false
	sc := bufio.NewScanner(bytes.NewReader(stdout))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == len(cachebenchModes)+1 && f[0] == "Mean":
			mean = f[1:]
		case len(f) >= 2 && f[0] == "Validation:":
			if f[1] != "ok" {
				return nil, fmt.Errorf("%w: vfleet-cachebench: the buffer did not hold what the passes wrote: %s", ErrParse, sc.Text())
			}
			validated = true
		}
	}
	if mean == nil || !validated {
		return nil, fmt.Errorf("%w: vfleet-cachebench reported no validated mean: %s", ErrParse, excerpt(bytes.Join([][]byte{stdout, stderr}, nil)))
	}
	out := make([]Sample, len(cachebenchModes))
	for i, m := range cachebenchModes {
		v, err := parseFinite(mean[i])
		if err != nil {
			return nil, fmt.Errorf("%w: vfleet-cachebench %s mean %q: %v", ErrParse, m.name, mean[i], err)
		}
		out[i] = Sample{Metric: m.metric, Unit: "MB/s", Value: v, Better: HigherIsBetter}
	}
	return out, nil
}
