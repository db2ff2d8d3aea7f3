package qemu

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/testutil"
	"github.com/vfleet/vfleet/internal/workload"
)

// A microVM of the rt kernel flavour boots Debian's PREEMPT_RT kernel and
// runs timerlat, whose histograms come back; the cloud kernel's microVM
// says, through the same workload, that it has no such tracer.
func TestPreemptRTGuestRunsTimerlat(t *testing.T) {
	if testing.Short() {
		t.Skip("boots two VMs, and builds the rt image once (about a minute)")
	}
	testutil.SharesMachine(t)
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "qemu-system-x86_64", "qemu-system-x86")
	rtImg := testutil.ImageOf(t, image.Variant{KernelFlavour: guest.KernelRT})
	cloudImg := testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	root, led := testutil.Ledger(t)
	ctx := context.Background()
	w, err := workload.Lookup("timerlat")
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := w.Command(w.Defaults(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	run := func(name string, img *image.Image, flavour string) (string, agent.Reply) {
		g := newVM(t, guest.Spec{Name: name, Kind: KindName, Runtime: MachineMicroVM, Accel: AccelTCG, KernelFlavour: flavour},
			guest.Env{RunID: testutil.RunID(t), RootFS: img.RootFS, AgentPath: img.AgentPath, StateDir: root + "/state-" + name, Ledger: led})
		startVM(t, g)
		defer g.Stop(ctx)
		uname, err := g.Exec(ctx, agent.Request{Argv: []string{"uname", "-rv"}})
		if err != nil {
			t.Fatal(err)
		}
		r, err := g.Exec(ctx, agent.Request{Argv: cmd.Argv, TimeoutMS: 20 * cmd.Timeout.Milliseconds(), MaxOutput: cmd.MaxOutput})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		return string(uname.Stdout), r
	}

	uname, r := run("rt", rtImg, guest.KernelRT)
	if !strings.Contains(uname, "-rt-") || !strings.Contains(uname, "PREEMPT_RT") {
		t.Errorf("the rt guest runs %q", uname)
	}
	if !r.Succeeded() {
		t.Fatalf("timerlat in the rt guest: %+v\n%s", r, r.Stderr)
	}
	samples, err := w.Parse(r.Stdout, r.Stderr)
	if err != nil {
		t.Fatalf("timerlat output: %v\n%s", err, r.Stdout)
	}
	for _, s := range samples {
		if s.Hist != nil && s.Hist.Count() == 0 {
			t.Errorf("%s: an empty histogram", s.Metric)
		}
	}
	t.Logf("timerlat in a PREEMPT_RT microVM under emulation: %+v", samples[:3])

	uname, r = run("cloud", cloudImg, "")
	if strings.Contains(uname, "PREEMPT_RT") {
		t.Errorf("the default guest runs %q", uname)
	}
	if r.Succeeded() {
		t.Fatal("timerlat ran in the cloud kernel, which has no tracer")
	}
	if err := w.(workload.Explainer).Explain(r.Stdout, r.Stderr); !errors.Is(err, workload.ErrNotSupported) {
		t.Errorf("the cloud kernel's refusal is not told as not supported: %v (stderr %s)", err, r.Stderr)
	}
}
