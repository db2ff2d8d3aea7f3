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
// hangs.
var hostTSCkHz = sync.OnceValue(func() int64 {
	const window = 50 * time.Millisecond
	t0, c0 := time.Now(), rdtsc()
	time.Sleep(window)
	c1, t1 := rdtsc(), time.Now()
	khz := int64(float64(c1-c0) / float64(t1.Sub(t0).Microseconds()) * 1000)
	// Round to 1 MHz: TSCs tick at whole megahertz, and the measurement's
	// own jitter is below that.
	return (khz + 500) / 1000 * 1000
})
