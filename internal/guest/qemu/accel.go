package qemu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/vfleet/vfleet/internal/doctor"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/regfile"
	"github.com/vfleet/vfleet/internal/tools"
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

// kvmUsable runs doctor's boot probe once per process for qemu and kernel,
// and once per host boot while qemu and kernel stay the same: answers, when
// not empty, is the file that keeps its last answer. say is told when it
// probes.
func kvmUsable(ctx context.Context, qemu tools.Tool, kernel, answers string, say func(string)) error {
	kvmProbe.mu.Lock()
	defer kvmProbe.mu.Unlock()
	memo := [2]string{qemu.Path, kernel}
	if err, ok := kvmProbe.done[memo]; ok {
		return err
	}
	key, keyErr := hostProbeKey(ctx, qemu, kernel)
	if keyErr != nil {
		answers = "" // an answer that cannot be told apart from another's is not kept
	}
	err := rememberedProbe(ctx, answers, key, func(ctx context.Context) error {
		say(fmt.Sprintf("probing whether KVM boots a kernel (at most %s; the answer is kept for this host boot)", kvmProbeTimeout))
		_, err := doctor.BootProbe(ctx, qemu.Path, AccelKVM, kernel, kvmProbeTimeout)
		return err
	})
	if ctx.Err() != nil {
		return ctx.Err() // interrupted, not an answer: probe again next time
	}
	if kvmProbe.done == nil {
		kvmProbe.done = map[[2]string]error{}
	}
	kvmProbe.done[memo] = err
	return err
}

// kvmAnswerFile, beside the image whose kernel is probed, keeps the KVM
// boot probe's last answer.
const kvmAnswerFile = "kvm-boot-probe.json"

// probeKey is everything a KVM boot probe's answer holds for: this boot of
// the host (a reboot may load other KVM modules or settings), its kernel,
// the QEMU and the guest kernel booted.
type probeKey struct {
	BootID       string `json:"boot_id"`
	HostKernel   string `json:"host_kernel"`
	QEMU         string `json:"qemu"` // path and version
	KernelSHA256 string `json:"kernel_sha256"`
}

// probeAnswer is a remembered probe: KVM booted the kernel, or why not.
type probeAnswer struct {
	Key    probeKey  `json:"key"`
	Works  bool      `json:"works"`
	Reason string    `json:"reason,omitempty"`
	Probed time.Time `json:"probed"`
}

func hostProbeKey(ctx context.Context, qemu tools.Tool, kernel string) (probeKey, error) {
	bootID, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return probeKey{}, err
	}
	release, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return probeKey{}, err
	}
	sum, err := image.FileSHA256(kernel)
	if err != nil {
		return probeKey{}, err
	}
	return probeKey{BootID: strings.TrimSpace(string(bootID)), HostKernel: strings.TrimSpace(string(release)),
		QEMU: qemuIdentity(ctx, qemu), KernelSHA256: sum}, nil
}

// rememberedProbe gives the answer kept in file when it is key's, else
// runs probe and keeps its answer there (file empty: probes, keeps
// nothing). An interrupted probe is no answer and is not kept.
func rememberedProbe(ctx context.Context, file string, key probeKey, probe func(context.Context) error) error {
	if file != "" {
		var a probeAnswer
		if b, err := os.ReadFile(file); err == nil && json.Unmarshal(b, &a) == nil && a.Key == key {
			if a.Works {
				return nil
			}
			return fmt.Errorf("%s (answer of the boot probe at %s, kept for this host boot, QEMU and kernel; `vfleet doctor` probes afresh)",
				a.Reason, a.Probed.UTC().Format(time.DateTime+" MST"))
		}
	}
	err := probe(ctx)
	if file == "" || ctx.Err() != nil {
		return err
	}
	a := probeAnswer{Key: key, Works: err == nil, Probed: time.Now()}
	if err != nil {
		a.Reason = err.Error()
	}
	// Not keeping it only costs the next run a probe.
	if b, merr := json.Marshal(a); merr == nil {
		_ = regfile.WriteFile(file, b, 0o644)
	}
	return err
}

// chooseAccel resolves the spec's accelerator: kvm must work when asked
// for; auto takes kvm when it works and tcg otherwise. TCG is not probed:
// a guest that cannot boot under it fails with the serial console's
// reason anyway.
func chooseAccel(ctx context.Context, want string, qemu tools.Tool, kernel, answers string, say func(string)) (accel, why string, err error) {
	switch want {
	case AccelTCG:
		return AccelTCG, "asked for", nil
	case AccelKVM:
		if err := kvmUsable(ctx, qemu, kernel, answers, say); err != nil {
			if ctx.Err() != nil {
				return "", "", ctx.Err()
			}
			return "", "", fmt.Errorf("%w: %v (use accel: tcg or auto to emulate)", ErrKVMUnusable, err)
		}
		return AccelKVM, "asked for", nil
	case "", AccelAuto:
		err := kvmUsable(ctx, qemu, kernel, answers, say)
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
