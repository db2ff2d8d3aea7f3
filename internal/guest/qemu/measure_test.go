package qemu

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/guest"
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
