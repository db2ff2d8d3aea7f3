package qemu

import (
	"sync"
	"time"
)

func rdtsc() uint64

// hostTSCkHz measures the host's TSC frequency against the monotonic
// clock, once per process. Under TCG a guest's TSC is the host's, and
// telling the guest kernel its frequency (tsc_early_khz) spares it the
// PIT calibration, which fails when the emulating thread is preempted;
// on microvm, with no HPET or PM timer to fall back on, the boot then
// hangs. The value is part of a template's kernel command line, so a
// measurement that wanders makes a new template.
var hostTSCkHz = sync.OnceValue(func() int64 {
	const window = 50 * time.Millisecond
	t0, c0 := tscAt(readTSC)
	time.Sleep(window)
	t1, c1 := tscAt(readTSC)
	return tscKHz(t0, c0, t1, c1)
})

// readTSC reads the TSC between two readings of the clock.
func readTSC() (before time.Time, tsc uint64, after time.Time) {
	before = time.Now()
	tsc = rdtsc()
	return before, tsc, time.Now()
}

// tscPairTries bounds the readings tscAt takes; tscPairTight is a gap
// between the clock's readings that only an uninterrupted reading has.
const (
	tscPairTries = 1000
	tscPairTight = 2 * time.Microsecond
)

// tscAt pairs a TSC value with the clock's time: the middle of the
// tightest of several readings. A thread preempted between the two reads
// of one pair, which on a busy host is common, would pair them
// milliseconds apart: a 50 ms window then gave 2050 MHz for a 2596 MHz
// TSC.
func tscAt(read func() (time.Time, uint64, time.Time)) (time.Time, uint64) {
	var at time.Time
	var tsc uint64
	gap := time.Duration(-1)
	for range tscPairTries {
		before, c, after := read()
		if d := after.Sub(before); gap < 0 || d < gap {
			at, tsc, gap = before.Add(d/2), c, d
		}
		if gap <= tscPairTight {
			break
		}
	}
	return at, tsc
}

// tscKHz is the frequency of TSC values c0 at t0 and c1 at t1, rounded to
// 1 MHz: TSCs tick at whole megahertz, and the measurement's own jitter
// is below that.
func tscKHz(t0 time.Time, c0 uint64, t1 time.Time, c1 uint64) int64 {
	khz := int64(float64(c1-c0) / float64(t1.Sub(t0).Nanoseconds()) * 1e6)
	return (khz + 500) / 1000 * 1000
}
