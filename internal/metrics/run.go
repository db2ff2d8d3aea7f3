package metrics

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vfleet/vfleet/internal/netpath/fastpath"
	"github.com/vfleet/vfleet/internal/runner"
	"github.com/vfleet/vfleet/internal/store"
)

var (
	runLabels   = []string{"run", "scenario"}
	guestLabels = []string{"run", "guest", "group", "kind", "runtime"}
	netLabels   = append(append([]string(nil), guestLabels...), "interface")

	descRunInfo = prometheus.NewDesc("vfleet_run_info",
		"A run of this process or of the store, always 1; its labels say what it is and its status.",
		[]string{"run", "scenario", "key", "label", "status"}, nil)
	descRunSteps = prometheus.NewDesc("vfleet_run_steps_total",
		"Steps the run's plan has, warm-ups included.", runLabels, nil)
	descRunStepsDone = prometheus.NewDesc("vfleet_run_steps_done_total",
		"Steps the run has finished, failed ones included.", runLabels, nil)
	descRunSamples = prometheus.NewDesc("vfleet_run_samples_total",
		"Samples the run has stored.", runLabels, nil)
	descRunFailures = prometheus.NewDesc("vfleet_run_failures_total",
		"Failed steps and guest starts of the run.", runLabels, nil)
	descRunStart = prometheus.NewDesc("vfleet_run_start_time_seconds",
		"When the run started, in seconds since the Unix epoch.", runLabels, nil)

	descGuestUp = prometheus.NewDesc("vfleet_guest_up",
		"1 while the guest runs; 0 once it is stopped or when it failed to start.", guestLabels, nil)
	descGuestBoot = prometheus.NewDesc("vfleet_guest_boot_seconds",
		"Time from the guest's start to its agent answering.", guestLabels, nil)
	descGuestCPU = prometheus.NewDesc("vfleet_guest_cpu_seconds_total",
		"CPU time (user+system) used by the guest: its cgroup's, or its processes' and their finished children's.", guestLabels, nil)
	descGuestMem = prometheus.NewDesc("vfleet_guest_memory_bytes",
		"Memory the guest uses: its cgroup's usage (page cache included), or its processes' resident set.", guestLabels, nil)
	descGuestReadErrors = prometheus.NewDesc("vfleet_guest_read_errors_total",
		"Scrapes at which the guest's usage could not be read (its cgroup or processes were gone).", guestLabels, nil)
	descDataPathPackets = prometheus.NewDesc("vfleet_datapath_packets_total",
		"Packets seen by a run's eBPF data path, by what it did with them: redirected (forwarded by the program itself), passed (to the host side's stack) or dropped.",
		[]string{"run", "path", "action"}, nil)
	descDataPathPassed = prometheus.NewDesc("vfleet_datapath_passed_packets_total",
		"Packets an eBPF data path handed to the stack, by the reason it could not forward them.",
		[]string{"run", "path", "reason"}, nil)
	descBlockRead = prometheus.NewDesc("vfleet_guest_block_read_bytes_total",
		"Bytes the guest's processes made the block layer read (/proc/PID/io read_bytes; for a VM, its QEMU's).", guestLabels, nil)
	descBlockWrite = prometheus.NewDesc("vfleet_guest_block_write_bytes_total",
		"Bytes the guest's processes made the block layer write (/proc/PID/io write_bytes; for a VM, its QEMU's).", guestLabels, nil)
	descNetRxBytes = prometheus.NewDesc("vfleet_guest_network_receive_bytes_total",
		"Bytes received by an interface of the guest's own network namespace.", netLabels, nil)
	descNetTxBytes = prometheus.NewDesc("vfleet_guest_network_transmit_bytes_total",
		"Bytes sent by an interface of the guest's own network namespace.", netLabels, nil)
	descNetRxPackets = prometheus.NewDesc("vfleet_guest_network_receive_packets_total",
		"Packets received by an interface of the guest's own network namespace.", netLabels, nil)
	descNetTxPackets = prometheus.NewDesc("vfleet_guest_network_transmit_packets_total",
		"Packets sent by an interface of the guest's own network namespace.", netLabels, nil)
)

// Options configure a RunCollector.
type Options struct {
	// Root is where /sys and /proc are found: "/" (the default) on a live
	// system, a recorded tree in tests.
	Root string
	// Now is the clock, time.Now by default.
	Now func() time.Time
}

// RunCollector is a runner.Observer that remembers what the runs of this
// process did and a prometheus.Collector that reports it, reading the live
// guests' usage at each scrape. It is safe for concurrent use.
type RunCollector struct {
	root string
	now  func() time.Time

	mu        sync.Mutex
	dataPaths map[int64]runner.DataPaths
	runs      map[int64]*runState
	guests    map[guestKey]*guestState
	values    *valueSet
}

type runState struct {
	ev                         runner.RunEvent
	status                     string
	started                    time.Time
	stepsDone, samples, failed uint64
}

type guestKey struct {
	run  int64
	name string
}

type guestState struct {
	ev         runner.GuestEvent
	up, booted bool
	src        source
	readErrors uint64
}

var (
	_ runner.Observer        = (*RunCollector)(nil)
	_ runner.NetworkObserver = (*RunCollector)(nil)
	_ prometheus.Collector   = (*RunCollector)(nil)
)

// NewRunCollector returns a collector with no runs yet.
func NewRunCollector(opts Options) *RunCollector {
	if opts.Root == "" {
		opts.Root = "/"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &RunCollector{root: opts.Root, now: opts.Now, runs: map[int64]*runState{}, dataPaths: map[int64]runner.DataPaths{},
		guests: map[guestKey]*guestState{}, values: newValueSet()}
}

// RunStarted implements runner.Observer.
func (c *RunCollector) RunStarted(ev runner.RunEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.runs[ev.ID] = &runState{ev: ev, status: store.StatusRunning, started: c.now()}
}

// NetworkReady implements runner.NetworkObserver: the run's eBPF data
// paths are read at each scrape from now on.
func (c *RunCollector) NetworkReady(runID int64, paths runner.DataPaths) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dataPaths[runID] = paths
}

// GuestStarting implements runner.Observer.
func (c *RunCollector) GuestStarting(runner.GuestEvent) func(runner.GuestEvent, error) {
	return func(ev runner.GuestEvent, err error) {
		// The files are found before taking the lock: stat calls must not
		// hold up a scrape.
		var src source
		if err == nil {
			src = resolveSource(c.root, ev.Cgroup, ev.PIDs)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.guests[guestKey{ev.RunID, ev.Name}] = &guestState{ev: ev, up: err == nil, booted: err == nil, src: src}
		if err != nil {
			if r := c.runs[ev.RunID]; r != nil {
				r.failed++
			}
		}
	}
}

// StepStarted implements runner.Observer.
func (c *RunCollector) StepStarted(ev runner.StepEvent) func(error) {
	return func(err error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		r := c.runs[ev.RunID]
		if r == nil {
			return
		}
		r.stepsDone++
		// An interrupted step is not stored as a failure either.
		if err != nil && !errors.Is(err, context.Canceled) {
			r.failed++
		}
	}
}

// SamplesStored implements runner.Observer.
func (c *RunCollector) SamplesStored(runID int64, samples []store.Sample) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.runs[runID]; r != nil {
		r.samples += uint64(len(samples))
	}
	c.values.add(samples)
}

// TeardownStarted implements runner.Observer.
func (c *RunCollector) TeardownStarted(int64) func(error) { return func(error) {} }

// GuestStopped implements runner.Observer.
func (c *RunCollector) GuestStopped(ev runner.GuestEvent, _ error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.guests[guestKey{ev.RunID, ev.Name}]; g != nil {
		g.up = false
	}
}

// RunFinished implements runner.Observer.
func (c *RunCollector) RunFinished(runID int64, status string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.runs[runID]; r != nil {
		r.status = status
	}
}

// Describe sends nothing, which makes this an unchecked collector: the
// series of vfleet_sample_value carry each workload's own parameters as
// labels, so their label names are not known in advance.
func (c *RunCollector) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector. The guests' files are read
// without holding the lock, so a slow read never stalls the runner.
func (c *RunCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	var metrics []prometheus.Metric
	for _, r := range c.runs {
		metrics = append(metrics, runMetrics(r.ev.ID, r.ev.Scenario, r.ev.Key, r.ev.Label, r.status)...)
		l := []string{strconv.FormatInt(r.ev.ID, 10), r.ev.Scenario}
		metrics = append(metrics,
			prometheus.MustNewConstMetric(descRunSteps, prometheus.CounterValue, float64(r.ev.Steps), l...),
			prometheus.MustNewConstMetric(descRunStepsDone, prometheus.CounterValue, float64(r.stepsDone), l...),
			prometheus.MustNewConstMetric(descRunSamples, prometheus.CounterValue, float64(r.samples), l...),
			prometheus.MustNewConstMetric(descRunFailures, prometheus.CounterValue, float64(r.failed), l...),
			prometheus.MustNewConstMetric(descRunStart, prometheus.GaugeValue, unixSeconds(r.started), l...))
	}
	metrics = append(metrics, c.values.metrics()...)
	type live struct {
		g      *guestState
		labels []string
	}
	var lives []live
	for _, g := range c.guests {
		l := []string{strconv.FormatInt(g.ev.RunID, 10), g.ev.Name, g.ev.Group, g.ev.Kind, g.ev.Runtime}
		metrics = append(metrics, prometheus.MustNewConstMetric(descGuestUp, prometheus.GaugeValue, boolValue(g.up), l...))
		if g.booted {
			metrics = append(metrics, prometheus.MustNewConstMetric(descGuestBoot, prometheus.GaugeValue, g.ev.BootTime.Seconds(), l...))
		}
		if g.up {
			lives = append(lives, live{g, l})
		}
	}
	dataPaths := make(map[int64]runner.DataPaths, len(c.dataPaths))
	for id, dp := range c.dataPaths {
		dataPaths[id] = dp
	}
	c.mu.Unlock()

	for _, m := range metrics {
		ch <- m
	}
	for id, dp := range dataPaths {
		for _, m := range dataPathMetrics(id, dp.DataPathCounters()) {
			ch <- m
		}
	}
	for _, lv := range lives {
		u, err := lv.g.src.read()
		if err != nil {
			c.mu.Lock()
			lv.g.readErrors++
			c.mu.Unlock()
		}
		if u.HasCPU {
			ch <- prometheus.MustNewConstMetric(descGuestCPU, prometheus.CounterValue, u.CPUSeconds, lv.labels...)
		}
		if u.HasMemory {
			ch <- prometheus.MustNewConstMetric(descGuestMem, prometheus.GaugeValue, u.MemoryBytes, lv.labels...)
		}
		if u.HasIO {
			ch <- prometheus.MustNewConstMetric(descBlockRead, prometheus.CounterValue, u.ReadBytes, lv.labels...)
			ch <- prometheus.MustNewConstMetric(descBlockWrite, prometheus.CounterValue, u.WriteBytes, lv.labels...)
		}
		for _, n := range u.Net {
			l := append(append([]string(nil), lv.labels...), n.Interface)
			ch <- prometheus.MustNewConstMetric(descNetRxBytes, prometheus.CounterValue, float64(n.RxBytes), l...)
			ch <- prometheus.MustNewConstMetric(descNetTxBytes, prometheus.CounterValue, float64(n.TxBytes), l...)
			ch <- prometheus.MustNewConstMetric(descNetRxPackets, prometheus.CounterValue, float64(n.RxPackets), l...)
			ch <- prometheus.MustNewConstMetric(descNetTxPackets, prometheus.CounterValue, float64(n.TxPackets), l...)
		}
		c.mu.Lock()
		errs := lv.g.readErrors
		c.mu.Unlock()
		ch <- prometheus.MustNewConstMetric(descGuestReadErrors, prometheus.CounterValue, float64(errs), lv.labels...)
	}
}

// dataPathMetrics turns a run's data path counters into series; a closed
// network reports no paths and so no series.
func dataPathMetrics(runID int64, counters map[string]fastpath.Counters) []prometheus.Metric {
	run := strconv.FormatInt(runID, 10)
	var out []prometheus.Metric
	for path, c := range counters {
		for action, v := range map[string]uint64{"redirected": c.Redirected, "passed": c.Passed, "dropped": c.Dropped} {
			out = append(out, prometheus.MustNewConstMetric(descDataPathPackets, prometheus.CounterValue, float64(v), run, path, action))
		}
		for reason, v := range c.PassedByReason {
			out = append(out, prometheus.MustNewConstMetric(descDataPathPassed, prometheus.CounterValue, float64(v), run, path, reason))
		}
	}
	return out
}

func runMetrics(id int64, scenario, key, label, status string) []prometheus.Metric {
	return []prometheus.Metric{prometheus.MustNewConstMetric(descRunInfo, prometheus.GaugeValue, 1,
		strconv.FormatInt(id, 10), scenario, key, label, status)}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
