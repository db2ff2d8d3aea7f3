package netpath

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/testutil"
)

// The passthrough path takes VMs only, each on a device of its own, which
// the VM's emulator opens itself.
func TestPassthroughPathTakesVMsOnly(t *testing.T) {
	if err := CheckVMPath(Passthrough); err != nil {
		t.Errorf("VMs refused: %v", err)
	}
	if err := CheckNamespacePath(Passthrough); !errors.Is(err, ErrPathNotForNamespaces) || !strings.Contains(err.Error(), "vfio") {
		t.Errorf("namespace guests: %v; want ErrPathNotForNamespaces naming vfio", err)
	}
	f, kind, err := OpenVMDevice("/run/netns/none", "0000:03:10.0")
	if f != nil || kind != VMVFIO || err != nil {
		t.Errorf("OpenVMDevice of a PCI address: %v, %s, %v; want nothing to open, vfio", f, kind, err)
	}
	if _, _, err := (Sides{Passthrough: []string{"0000:03:10.0"}}).passthroughLink(1, nil); !errors.Is(err, ErrPassthroughRefused) {
		t.Errorf("a second VM on one device: %v, want ErrPassthroughRefused", err)
	}
}

// TestPassthroughRefusedOnThisHost: where the host has no IOMMU, as CI's
// has none, a device is refused saying so, before anything is bound.
func TestPassthroughRefusedOnThisHost(t *testing.T) {
	if entries, _ := os.ReadDir("/sys/kernel/iommu_groups"); len(entries) > 0 {
		t.Skip("this host has an IOMMU: TestPassthroughDevice lends a device where VFLEET_TEST_PASSTHROUGH names one")
	}
	err := CheckPassthrough(hostRoot, []string{"0000:00:00.0"}, 1)
	if !errors.Is(err, ErrPassthroughRefused) || !strings.Contains(err.Error(), "no IOMMU") {
		t.Fatalf("got %v, want ErrPassthroughRefused for no IOMMU", err)
	}
}

// passthroughEnv names a PCI device (0000:03:10.0) the tests may lend to
// vfio-pci and give back: an SR-IOV virtual function, or a NIC the host
// does not use.
const passthroughEnv = "VFLEET_TEST_PASSTHROUGH"

// TestPassthroughDevice lends a real device to a VM's path as a run does:
// checked, bound to vfio-pci for the attach, with its permanent MAC the
// VM's (a virtual function: the VM's MAC set through its physical
// function), and back with its own driver and MAC when the network closes.
func TestPassthroughDevice(t *testing.T) {
	testutil.RequiresRoot(t)
	addr := os.Getenv(passthroughEnv)
	if addr == "" {
		t.Skipf("no device to lend: set %s to a PCI address (%v)", passthroughEnv, CheckPassthroughHost(hostRoot))
	}
	if err := CheckPassthrough(hostRoot, []string{addr}, 1); err != nil {
		t.Fatal(err)
	}
	before, err := passthroughDevice(hostRoot, addr)
	if err != nil {
		t.Fatal(err)
	}
	// What the VM's NIC must have: a whole NIC's own MAC, or the one a VF
	// reports through its physical function after the attach.
	vfMAC := func() net.HardwareAddr {
		mac, err := netlinkVFs{}.VFMAC(before.VF.PF, before.VF.Index)
		if err != nil {
			t.Fatal(err)
		}
		return mac
	}
	var vfBefore net.HardwareAddr
	if before.PhysFn != "" {
		vfBefore = vfMAC()
	}
	led := newLedger(t)
	n, err := Create(context.Background(), Options{RunKey: runKey(), Ledger: led, Paths: []Path{Passthrough}, Passthrough: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			n.Close()
		}
	}()
	link, err := n.AttachTap("vm0", Passthrough)
	if err != nil {
		t.Fatal(err)
	}
	var want net.HardwareAddr
	if before.PhysFn == "" {
		want = before.Ifaces[0].MAC
	} else {
		want = vfMAC()
	}
	if link.HostIf != addr || link.MAC.String() != want.String() {
		t.Errorf("link on %s with MAC %s, want %s with %s", link.HostIf, link.MAC, addr, want)
	}
	if err := expectDriver(hostRoot, addr, vfioDriver); err != nil {
		t.Error(err)
	}
	closed = true
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := expectDriver(hostRoot, addr, before.Driver); err != nil {
		t.Error(err)
	}
	if before.PhysFn != "" && vfMAC().String() != vfBefore.String() {
		t.Errorf("VF's MAC is %s after the run, want %s back", vfMAC(), vfBefore)
	}
	if p := led.Pending(); len(p) > 0 {
		t.Errorf("ledger still lists %v", p)
	}
}
