package qemu

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/density"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/ksm"
	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/testutil"
)

// TestMeasureBoot prints boot-to-agent-ready times, stop times and the
// idle QEMU's resident memory for both machines, for docs/vm.md. It
// asserts nothing and runs only when VFLEET_MEASURE_BOOTS is set to the
// number of boots per machine.
func TestMeasureBoot(t *testing.T) {
	n := 0
	fmt.Sscan(os.Getenv("VFLEET_MEASURE_BOOTS"), &n)
	if n <= 0 {
		t.Skip("measurement: set VFLEET_MEASURE_BOOTS=N to run")
	}
	testutil.RequiresRoot(t)
	img := testutil.Image(t)
	k, _ := guest.Lookup(KindName)
	for _, machine := range []string{MachineQ35, MachineMicroVM} {
		var boots, ready, stops []time.Duration
		var uptimes, rss []string
		for i := 0; i < n; i++ {
			root := t.TempDir()
			led, err := ledger.Create(root, "m")
			if err != nil {
				t.Fatal(err)
			}
			g, err := k.New(guest.Spec{Name: "m", Kind: KindName, Runtime: machine, Accel: AccelTCG},
				guest.Env{RunID: "m", RootFS: img.RootFS, AgentPath: img.AgentPath, StateDir: root + "/s", Ledger: led})
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			info := g.Info()
			boots = append(boots, info.BootTime)
			d, _ := time.ParseDuration(info.Details["qemu_start_to_ready"])
			ready = append(ready, d)
			uptimes = append(uptimes, info.Details["guest_uptime_at_ready"])
			if i == 0 {
				time.Sleep(5 * time.Second)
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", info.PIDs[0]))
				for _, l := range strings.Split(string(b), "\n") {
					if strings.HasPrefix(l, "VmRSS:") {
						rss = append(rss, strings.TrimSpace(strings.TrimPrefix(l, "VmRSS:")))
					}
				}
			}
			began := time.Now()
			if err := g.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			stops = append(stops, time.Since(began))
			led.Close()
		}
		t.Logf("%s: Start->ready %v\n  qemu start->ready %v (p50 %s, max %s)\n  guest uptime at ready %v\n  stop %v\n  idle RSS %v",
			machine, boots, ready, pct(ready, 50), pct(ready, 100), uptimes, stops, rss)
	}
}

func pct(d []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s) - 1) * p / 100
	return s[i].Round(time.Millisecond)
}

// TestMeasureCloneFleet prints what a fleet of cloned microVMs costs and
// how fast it comes up, beside cold boots of the same shape, for
// docs/fleet.md. It asserts nothing and runs only when
// VFLEET_MEASURE_CLONES is set to the largest fleet (e.g. 100);
// VFLEET_MEASURE_BOOTS_BESIDE sets how many cold boots go beside it
// (default 25: a hundred would not fit in this host's memory).
func TestMeasureCloneFleet(t *testing.T) {
	n := 0
	fmt.Sscan(os.Getenv("VFLEET_MEASURE_CLONES"), &n)
	if n <= 0 {
		t.Skip("measurement: set VFLEET_MEASURE_CLONES=N to run")
	}
	boots := 25
	fmt.Sscan(os.Getenv("VFLEET_MEASURE_BOOTS_BESIDE"), &boots)
	testutil.RequiresRoot(t)
	img := testutil.Image(t)
	root := t.TempDir()
	led, err := ledger.Create(root, "m")
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	ctx := context.Background()
	k, _ := guest.Lookup(KindName)
	// The template first, so that every fleet below starts from it.
	fleet(t, k, img, root, led, "warm", 1, guest.Spec{Launch: LaunchClone}, false)
	// One guest at a time, clones and cold boots in turn.
	var clone, boot []time.Duration
	for i := 0; i < 5; i++ {
		clone = append(clone, fleet(t, k, img, root, led, "clone-alone", 1, guest.Spec{Launch: LaunchClone}, false)...)
		boot = append(boot, fleet(t, k, img, root, led, "boot-alone", 1, guest.Spec{Launch: LaunchBoot}, false)...)
	}
	t.Logf("alone, 5 each: clone p50 %s, cold boot p50 %s: %.1fx", pct(clone, 50), pct(boot, 50),
		float64(pct(boot, 50))/float64(pct(clone, 50)))
	for _, size := range []int{25, n} {
		fleet(t, k, img, root, led, fmt.Sprintf("clones-%d", size), size, guest.Spec{Launch: LaunchClone}, size == n)
	}
	entry, err := ksm.System.Hold(ctx, led, "measure")
	if err != nil {
		t.Logf("KSM: %v", err)
	} else {
		fleet(t, k, img, root, led, fmt.Sprintf("clones-%d-ksm", n), n, guest.Spec{Launch: LaunchClone, MemoryMerge: true}, true)
		if err := led.Release(ctx, entry); err != nil {
			t.Error(err)
		}
	}
	if boots > 0 {
		fleet(t, k, img, root, led, fmt.Sprintf("boots-%d", boots), boots, guest.Spec{Launch: LaunchBoot}, true)
	}
}

// measureConcurrency is how many guests start at once, as in a run
// (runner.Options.StartConcurrency).
const measureConcurrency = 4

// fleet starts size microVMs of 256 MiB like spec, measureConcurrency at
// a time, and logs when they were ready; with idle set, it then lets the
// fleet idle and logs its memory and CPU. It stops them all and returns
// each one's time from Start to ready.
func fleet(t *testing.T, k guest.Kind, img *image.Image, root string, led *ledger.Ledger, label string, size int, spec guest.Spec, idle bool) []time.Duration {
	ctx := context.Background()
	guests := make([]guest.Guest, size)
	errs := make([]error, size)
	sem := make(chan struct{}, measureConcurrency)
	var wg sync.WaitGroup
	began := time.Now()
	for i := range guests {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s := spec
			s.Name, s.Kind, s.Runtime, s.Accel, s.MemoryBytes = fmt.Sprintf("%s-%d", label, i), KindName, MachineMicroVM, AccelTCG, 256<<20
			g, err := k.New(s, guest.Env{RunID: "m", RootFS: img.RootFS, AgentPath: img.AgentPath, StateDir: root + "/s", Ledger: led})
			if err == nil {
				err = g.Start(ctx)
			}
			guests[i], errs[i] = g, err
		}()
	}
	wg.Wait()
	allReady := time.Since(began)
	defer func() {
		stopped := time.Now()
		var stops sync.WaitGroup
		for _, g := range guests {
			if g != nil {
				stops.Go(func() { g.Stop(ctx) })
			}
		}
		stops.Wait()
		t.Logf("%s: stopped in %s", label, time.Since(stopped).Round(time.Millisecond))
	}()
	var ready []time.Duration
	for i, g := range guests {
		if errs[i] != nil {
			t.Fatalf("%s: %v", g.Spec().Name, errs[i])
		}
		ready = append(ready, g.Info().BootTime)
	}
	t.Logf("%s: %d ready in %s; each Start to ready p50 %s, p95 %s, max %s", label, size, allReady.Round(time.Millisecond),
		pct(ready, 50), pct(ready, 95), pct(ready, 100))
	if !idle {
		return ready
	}
	var pids []int
	for _, g := range guests {
		pids = append(pids, g.Info().PIDs...)
	}
	const window = 10 * time.Second
	cpuBefore, _ := density.CPUTime(pids)
	selfBefore := selfCPU()
	time.Sleep(window)
	cpuAfter, _ := density.CPUTime(pids)
	selfAfter := selfCPU()
	if spec.MemoryMerge {
		from, _ := ksm.System.ReadStats()
		wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		settled := time.Now()
		st, err := ksm.System.WaitScans(wctx, from, 2)
		cancel()
		t.Logf("%s: KSM after %s (%v): %d pages shared, %d sharing them (%.0f MiB saved)", label,
			time.Since(settled).Round(time.Second), err, st.PagesShared, st.PagesSharing, float64(st.PagesSharing)*4096/(1<<20))
	}
	var total, ram density.Usage
	for _, pid := range pids {
		u, err := density.Memory([]int{pid})
		if err != nil {
			t.Fatal(err)
		}
		r, err := density.RegionMemory(pid, 256<<20)
		if err != nil {
			t.Fatal(err)
		}
		total.PSS, total.RSS, total.Shared, total.Private = total.PSS+u.PSS, total.RSS+u.RSS, total.Shared+u.Shared, total.Private+u.Private
		ram.PSS += r.PSS
	}
	per := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/float64(size)/(1<<20)) }
	t.Logf("%s: per guest PSS %s (guest RAM %s, QEMU beyond it %s), RSS %s (shared %s, private %s); fleet PSS %.2f GiB",
		label, per(total.PSS), per(ram.PSS), per(total.PSS-ram.PSS), per(total.RSS), per(total.Shared), per(total.Private), float64(total.PSS)/(1<<30))
	t.Logf("%s: idle over %s: QEMUs %.1f%% of a core together, the process holding the agents %.2f%%", label, window,
		100*(cpuAfter-cpuBefore).Seconds()/window.Seconds(), 100*(selfAfter-selfBefore).Seconds()/window.Seconds())
	return ready
}

// selfCPU is this process's own CPU time, its children's apart.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
