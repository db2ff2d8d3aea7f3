package workload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/testutil"
	"github.com/vfleet/vfleet/internal/workload/programs"
)

// runOnHost executes ex on the host as the agent would in a guest: bounded
// by its timeout, in its own process group, in its working directory if
// it names one. wrap goes before the argv.
func runOnHost(t *testing.T, ex Exec, wrap ...string) (stdout, stderr []byte, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ex.Timeout)
	defer cancel()
	argv := append(append([]string{}, wrap...), ex.Argv...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = ex.WorkDir
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// cyclictest keeps its running status in /dev/shm/cyclictest<pid>
	// and must remove it on the way out.
	shm := fmt.Sprintf("/dev/shm/cyclictest%d", cmd.Process.Pid)
	t.Cleanup(func() {
		if _, err := os.Stat(shm); err == nil {
			t.Errorf("%s left behind", shm)
			os.Remove(shm)
		}
	})
	err = cmd.Wait()
	return o.Bytes(), e.Bytes(), err
}

// TestTimerLatencyOnTheHost runs the command the adapter builds for one
// second and parses what cyclictest prints.
func TestTimerLatencyOnTheHost(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, programs.Cyclictest.Name, programs.Cyclictest.Package)
	before := testutil.TakeSnapshot(t)
	t.Cleanup(func() { testutil.CheckLeaks(t, before) })

	w := mustLookup(t, "timer-latency")
	for _, params := range []Params{
		{"cpu": "0"},
		{"threads": "2", "priority": "0", "mlock": "false", "interval": "500"},
	} {
		ex, err := w.Command(merge(w.Defaults(), params), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		stdout, stderr, runErr := runOnHost(t, ex)
		samples, err := w.Parse(stdout, stderr)
		if errors.Is(err, ErrNotPermitted) {
			t.Skipf("this host does not permit what the workload needs: %v", err)
		}
		if err != nil || runErr != nil {
			t.Fatalf("%v: exit: %v, parse: %v", params, runErr, err)
		}
		if int64(len(stdout)) > ex.MaxOutput {
			t.Errorf("%v: %d bytes of output, the agent would keep %d", params, len(stdout), ex.MaxOutput)
		}
		h := samples[0].Hist
		if h == nil || h.Count() == 0 {
			t.Fatalf("%v: no distribution in %+v", params, samples[0])
		}
		v := func(m string) float64 { return find(samples, m) }
		order := []string{"timer.latency_us.min", "timer.latency_us", "timer.latency_us.p99", "timer.latency_us.p999", "timer.latency_us.max"}
		for i := 1; i < len(order); i++ {
			// The histogram's figures are within a bucket's width of the
			// exact ones the minimum and maximum are.
			if v(order[i-1]) > v(order[i])*(1+stats.HistogramRelError) {
				t.Errorf("%v: %s %v above %s %v", params, order[i-1], v(order[i-1]), order[i], v(order[i]))
			}
		}
		if mean := v("timer.latency_us.mean"); mean < v("timer.latency_us.min") || mean > v("timer.latency_us.max") {
			t.Errorf("%v: mean %v outside [min, max]", params, mean)
		}
		if v("timer.overflows") < 0 {
			t.Errorf("%v: no timer.overflows sample", params)
		}
		t.Logf("%v: %d wake-ups, min %.0f, p50 %.1f, p99 %.1f, max %.0f us, %.0f overflows, %d bytes of output",
			params, h.Count(), v("timer.latency_us.min"), v("timer.latency_us"), v("timer.latency_us.p99"),
			v("timer.latency_us.max"), v("timer.overflows"), len(stdout))
	}
}

// A guest without CAP_SYS_NICE (a container with the default capability
// set) gets an error naming it, not a parse failure about missing figures.
func TestTimerLatencyWithoutCapSysNice(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, programs.Cyclictest.Name, programs.Cyclictest.Package)
	testutil.RequiresTool(t, "setpriv", "util-linux")
	before := testutil.TakeSnapshot(t)
	t.Cleanup(func() { testutil.CheckLeaks(t, before) })

	w := mustLookup(t, "timer-latency")
	ex, err := w.Command(w.Defaults(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, runErr := runOnHost(t, ex, "setpriv", "--inh-caps=-sys_nice", "--bounding-set=-sys_nice")
	if runErr == nil {
		t.Errorf("cyclictest without CAP_SYS_NICE exited 0")
	}
	if _, err := w.Parse(stdout, stderr); !errors.Is(err, ErrNotPermitted) {
		t.Fatalf("err = %v, want ErrNotPermitted", err)
	}
}
