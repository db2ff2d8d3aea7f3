package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/hostset"
	"github.com/vfleet/vfleet/internal/ledger"
)

// kindRTHold is the ledger kind of a run's hold on the host's real-time
// settings.
const kindRTHold = "rt-settings"

func init() { ledger.RegisterUndo(kindRTHold, hostset.Undo) }

// rtSettings are the host's real-time settings a scenario may hold, files
// under /proc; the holds are kept in /run, which a reboot empties as it
// resets the settings.
var rtSettings = hostset.Set{Kind: kindRTHold, Dir: "/proc", State: "/run/vfleet-rt-settings.json"}

// hostSettingsOf lists what the scenario's host_settings write: RT
// throttling, and the affinity of every interrupt, each optional since
// the kernel keeps some (per-CPU timers, some MSI vectors) where they are.
func (r *run) hostSettingsOf() ([]hostset.Setting, error) {
	hs := r.plan.Spec.HostSettings
	var out []hostset.Setting
	if hs.RTRuntimeUS != nil {
		out = append(out, hostset.Setting{Name: "sys/kernel/sched_rt_runtime_us", Value: strconv.Itoa(*hs.RTRuntimeUS)})
	}
	if hs.IRQAffinity != "" {
		irqs, err := filepath.Glob(filepath.Join(rtSettings.Dir, "irq", "*", "smp_affinity_list"))
		if err != nil {
			return nil, err
		}
		for _, path := range irqs {
			name, _ := filepath.Rel(rtSettings.Dir, path)
			out = append(out, hostset.Setting{Name: name, Value: hs.IRQAffinity, Optional: true})
		}
	}
	return out, nil
}

// holdHostSettings writes the scenario's host_settings for the run and
// records the host as the run will measure it; the run's teardown, or
// `vfleet clean` after a crash, lets go of them and so puts the host's
// own back.
func (r *run) holdHostSettings(ctx context.Context) error {
	if r.plan.Spec.HostSettings == nil {
		return nil
	}
	settings, err := r.hostSettingsOf()
	if err != nil {
		return fmt.Errorf("host_settings: %w", err)
	}
	entry, refused, err := rtSettings.Hold(ctx, r.led, r.key, settings)
	if entry.ID != "" {
		r.rtHold = &entry
	}
	if err != nil {
		return fmt.Errorf("host_settings: %w", err)
	}
	var set []string
	if hs := r.plan.Spec.HostSettings; hs.RTRuntimeUS != nil {
		set = append(set, "sched_rt_runtime_us="+strconv.Itoa(*hs.RTRuntimeUS))
	}
	if hs := r.plan.Spec.HostSettings; hs.IRQAffinity != "" {
		moved := -len(refused)
		for _, s := range settings {
			if s.Optional {
				moved++
			}
		}
		set = append(set, fmt.Sprintf("irq_affinity=%s (%d interrupts moved, %d kept where they are by the kernel: %s)",
			hs.IRQAffinity, moved, len(refused), irqNumbers(refused)))
	}
	r.opts.Progress.Logf("%shost settings while the run lasts: %s", r.label, strings.Join(set, "; "))
	host := r.opts.Host
	host.RealTime = hostinfo.CollectRealTime(hostinfo.Options{})
	host.RealTime.SetByRun = set
	if err := r.opts.Store.SetRunHost(ctx, r.id, host); err != nil {
		return fmt.Errorf("record host settings: %w", r.storeFailed(err))
	}
	return nil
}

// irqNumbers names interrupts by number from their settings' names.
func irqNumbers(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	nums := make([]string, len(names))
	for i, n := range names {
		nums[i] = filepath.Base(filepath.Dir(n))
	}
	return strings.Join(nums, " ")
}

// releaseHostSettings puts the host's settings back, unless another run
// still holds them.
func (r *run) releaseHostSettings(ctx context.Context, led *ledger.Ledger) error {
	if r.rtHold == nil {
		return nil
	}
	return led.Release(ctx, *r.rtHold)
}
