package qemu

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/vfleet/vfleet/internal/doctor"
	"github.com/vfleet/vfleet/internal/guest"
)

// Accelerators a spec can ask for.
const (
	AccelAuto = "auto"
	AccelKVM  = "kvm"
	AccelTCG  = "tcg"
)

// kvmProbeTimeout bounds the KVM boot probe: a kernel reaches its root
// mount in about a second under KVM; a host where KVM hangs must not hold
// a run up for long.
const kvmProbeTimeout = 10 * time.Second

// ErrKVMUnusable says KVM was asked for and does not run a guest here.
var ErrKVMUnusable = errors.New("kvm does not run guests on this host")

// kvmProbe remembers, per QEMU and kernel, whether KVM boots a kernel, so
// that a process probes once however many guests it starts; concurrent
// starts wait for the one probe.
var kvmProbe struct {
	mu   sync.Mutex
	done map[[2]string]error
}

// kvmUsable runs doctor's boot probe once per process for qemu and kernel.
func kvmUsable(ctx context.Context, qemu, kernel string) error {
	kvmProbe.mu.Lock()
	defer kvmProbe.mu.Unlock()
	key := [2]string{qemu, kernel}
	if err, ok := kvmProbe.done[key]; ok {
		return err
	}
	_, err := doctor.BootProbe(ctx, qemu, AccelKVM, kernel, kvmProbeTimeout)
	if ctx.Err() != nil {
		return ctx.Err() // interrupted, not an answer: probe again next time
	}
	if kvmProbe.done == nil {
		kvmProbe.done = map[[2]string]error{}
	}
	kvmProbe.done[key] = err
	return err
}

// chooseAccel resolves the spec's accelerator: kvm must work when asked
// for; auto takes kvm when it works and tcg otherwise. TCG is not probed:
// a guest that cannot boot under it fails with the serial console's
// reason anyway.
func chooseAccel(ctx context.Context, want, qemu, kernel string) (accel, why string, err error) {
	switch want {
	case AccelTCG:
		return AccelTCG, "asked for", nil
	case AccelKVM:
		if err := kvmUsable(ctx, qemu, kernel); err != nil {
			if ctx.Err() != nil {
				return "", "", ctx.Err()
			}
			return "", "", fmt.Errorf("%w: %v (use accel: tcg or auto to emulate)", ErrKVMUnusable, err)
		}
		return AccelKVM, "asked for", nil
	case "", AccelAuto:
		err := kvmUsable(ctx, qemu, kernel)
		if err == nil {
			return AccelKVM, "auto: kvm boots a kernel", nil
		}
		if ctx.Err() != nil {
			return "", "", ctx.Err()
		}
		return AccelTCG, "auto: " + err.Error(), nil
	}
	return "", "", fmt.Errorf("%w: unknown accel %q (known: auto, kvm, tcg)", guest.ErrNotSupported, want)
}
