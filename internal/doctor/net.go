package doctor

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"

	"github.com/vfleet/vfleet/internal/nsthread"
)

// inThrowawayNetns runs fn on an OS thread moved into a new, unnamed
// network namespace. The namespace has no bind mount under /run/netns, so
// once the thread leaves it nothing refers to it and the kernel deletes it
// with every link inside: cleanup cannot be forgotten or skipped.
func inThrowawayNetns(ctx context.Context, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		done <- nsthread.Do(netns.None(), func() error {
			ns, err := netns.New()
			if err != nil {
				return fmt.Errorf("create a network namespace: %w", err)
			}
			ns.Close()
			return fn()
		})
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		// fn only makes netlink and bpf calls, which return promptly; the
		// goroutine finishes on its own and the namespace goes with it.
		return ctx.Err()
	}
}

// checkNetns creates a namespace and brings its loopback up, which is what
// every data path does first.
func checkNetns(ctx context.Context) Result {
	err := inThrowawayNetns(ctx, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return fmt.Errorf("find loopback: %w", err)
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return fmt.Errorf("set loopback up: %w", err)
		}
		return nil
	})
	if err != nil {
		return Result{Status: Fail, Detail: err.Error(), Fix: "network namespaces need root and a kernel with CONFIG_NET_NS"}
	}
	return Result{Status: OK, Detail: "created one and brought its loopback up"}
}

// checkBPF asks the kernel to load minimal programs of the types the eBPF
// data paths attach: XDP on a device, and sched_cls for tc.
func checkBPF(context.Context) Result {
	var loaded, failed []string
	for _, pt := range []ebpf.ProgramType{ebpf.XDP, ebpf.SchedCLS} {
		if err := features.HaveProgramType(pt); err != nil {
			failed = append(failed, fmt.Sprintf("%s (%v)", pt, err))
		} else {
			loaded = append(loaded, pt.String())
		}
	}
	if len(failed) > 0 {
		return Result{Status: Fail, Detail: "cannot load " + strings.Join(failed, "; "),
			Fix: "the eBPF data paths need root and a kernel with CONFIG_BPF_SYSCALL"}
	}
	return Result{Status: OK, Detail: "loads " + strings.Join(loaded, " and ") + " programs"}
}

// errNotNative says the kernel accepted an XDP program on the veth but not
// in the driver's own (native) mode.
var errNotNative = errors.New("attached, but not in native mode")

// checkXDPNative attaches a pass-everything XDP program to a veth in
// native (driver) mode, as the xdp data path does; generic mode would
// still work but measures a different, slower path.
func checkXDPNative(ctx context.Context) Result {
	if err := inThrowawayNetns(ctx, attachNativeToVeth); err != nil {
		return Result{Status: Fail, Detail: "native XDP on veth: " + err.Error(),
			Fix: "the xdp data path needs root and a kernel whose veth driver supports XDP (4.19 or later)"}
	}
	return Result{Status: OK, Detail: "a program attached to a veth in driver mode"}
}

// attachNativeToVeth runs inside a throwaway namespace, which removes the
// pair when it goes. It owns the program too, so that a caller giving up
// on a timeout cannot close it mid-attach.
func attachNativeToVeth() error {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "vfleet_probe",
		Type: ebpf.XDP,
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R0, 2), // XDP_PASS
			asm.Return(),
		},
		License: "MIT",
	})
	if err != nil {
		return fmt.Errorf("load an XDP program: %w", err)
	}
	defer prog.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "vfprobe0"}, PeerName: "vfprobe1"}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("create veth pair: %w", err)
	}
	link, err := netlink.LinkByName(veth.Name)
	if err != nil {
		return fmt.Errorf("find %s: %w", veth.Name, err)
	}
	if err := netlink.LinkSetXdpFdWithFlags(link, prog.FD(), nl.XDP_FLAGS_DRV_MODE); err != nil {
		return fmt.Errorf("attach to %s in driver mode: %w", veth.Name, err)
	}
	// The kernel reports the mode it really used; believe that, not the flag.
	link, err = netlink.LinkByName(veth.Name)
	if err != nil {
		return fmt.Errorf("find %s: %w", veth.Name, err)
	}
	if x := link.Attrs().Xdp; x == nil || x.AttachMode != nl.XDP_ATTACHED_DRV {
		return errNotNative
	}
	return nil
}
