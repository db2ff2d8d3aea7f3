package qemu

import (
	"testing"
	"time"
)

// A reading preempted between its clock and TSC reads is not the one the
// frequency is measured from: on a busy host that gave a frequency a fifth
// off, and with it a new template for every run.
func TestTSCPairSkipsPreemptedReadings(t *testing.T) {
	const hz = 2_596_000_000
	base := time.Unix(1_700_000_000, 0)
	tscOf := func(at time.Time) uint64 { return uint64(at.Sub(base).Seconds() * hz) }
	// The first readings are preempted: the TSC is read 9 ms after the
	// clock, then the clock again 1 ms later.
	reader := func(start time.Time, preempted int) func() (time.Time, uint64, time.Time) {
		now, n := start, 0
		return func() (time.Time, uint64, time.Time) {
			n++
			before := now
			if n <= preempted {
				now = now.Add(10 * time.Millisecond)
				return before, tscOf(before.Add(9 * time.Millisecond)), now
			}
			now = now.Add(time.Microsecond)
			return before, tscOf(before.Add(500 * time.Nanosecond)), now
		}
	}
	t0, c0 := tscAt(reader(base.Add(time.Second), 2))
	t1, c1 := tscAt(reader(base.Add(time.Second+50*time.Millisecond), 0))
	if got := tscKHz(t0, c0, t1, c1); got != hz/1000 {
		t.Fatalf("measured %d kHz, want %d", got, hz/1000)
	}
}
