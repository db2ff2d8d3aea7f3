package netpath

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/ledger"
)

// fakeVFs holds physical functions' VFs' administrative MACs, by
// "PF/INDEX"; a PF with frozen set keeps them as they are, as a driver
// refusing the change without saying so would.
type fakeVFs struct {
	macs   map[string]net.HardwareAddr
	frozen bool
	sets   int
	// before, when set, runs before each change.
	before func()
}

func (f *fakeVFs) VFMAC(pf string, vf int) (net.HardwareAddr, error) {
	mac, ok := f.macs[fmt.Sprintf("%s/%d", pf, vf)]
	if !ok {
		return nil, fmt.Errorf("%w: %s/%d", errNoPF, pf, vf)
	}
	return mac, nil
}

func (f *fakeVFs) SetVFMAC(pf string, vf int, mac net.HardwareAddr) error {
	if f.before != nil {
		f.before()
	}
	key := fmt.Sprintf("%s/%d", pf, vf)
	if _, ok := f.macs[key]; !ok {
		return fmt.Errorf("%w: %s", errNoPF, key)
	}
	f.sets++
	if !f.frozen {
		f.macs[key] = mac
	}
	return nil
}

var vmMAC = net.HardwareAddr{0x02, 0x56, 0x46, 0, 0, 0x10}

// TestLendVirtualFunction: a VF whose physical function set no MAC gets
// the VM's planned one through its PF, recorded in the ledger first with
// the MAC it had, before it goes to vfio-pci; the undo puts the old one
// back.
func TestLendVirtualFunction(t *testing.T) {
	const addr = "0000:03:10.2" // VF 1 of enp3s0f0
	root := pciTree(t)
	led := newLedger(t)
	fs := &fakeSysfs{t: t, root: root, native: map[string]string{addr: "ixgbevf"}, probe: true}
	vfs := &fakeVFs{macs: map[string]net.HardwareAddr{"enp3s0f0/0": {2, 0, 0, 0, 0x10, 0}, "enp3s0f0/1": make(net.HardwareAddr, 6)}}
	vfs.before = func() {
		if p := led.Pending(); len(p) == 0 || p[0].Kind != kindVFMAC {
			t.Errorf("MAC set before the ledger knows it: %+v", p)
		}
		if len(fs.writes) > 0 {
			t.Error("MAC set after the device left its driver")
		}
	}
	entries, err := lendDevice(led, root, fs, vfs, addr, vmMAC)
	if err != nil {
		t.Fatal(err)
	}
	if got := vfs.macs["enp3s0f0/1"]; !slices.Equal(got, vmMAC) {
		t.Errorf("VF 1's MAC is %s, want the VM's %s", got, vmMAC)
	}
	if len(entries) != 2 || entries[0].Kind != kindVFMAC || entries[1].Kind != kindVFIODevice {
		t.Fatalf("entries %+v, want the VF's MAC, then the device", entries)
	}
	want := map[string]string{"pf": "enp3s0f0", "vf": "1", "mac": "00:00:00:00:00:00"}
	for k, v := range want {
		if entries[0].Data[k] != v {
			t.Errorf("MAC entry %s=%q, want %q", k, entries[0].Data[k], v)
		}
	}
	vfs.before = nil
	if err := undoVFMAC(vfs, entries[0]); err != nil {
		t.Fatal(err)
	}
	if got := vfs.macs["enp3s0f0/1"]; !slices.Equal(got, make(net.HardwareAddr, 6)) {
		t.Errorf("VF 1's MAC is %s after the undo, want none as before", got)
	}
	if got := vfs.macs["enp3s0f0/0"]; got.String() != "02:00:00:00:10:00" {
		t.Errorf("VF 0's MAC changed to %s", got)
	}
}

// TestLendWholeNIC: a whole NIC keeps its permanent MAC; nothing is set.
func TestLendWholeNIC(t *testing.T) {
	const addr = "0000:03:00.1"
	root := pciTree(t)
	vfs := &fakeVFs{macs: map[string]net.HardwareAddr{}}
	fs := &fakeSysfs{t: t, root: root, probe: true}
	entries, err := lendDevice(newLedger(t), root, fs, vfs, addr, vmMAC)
	if err != nil {
		t.Fatal(err)
	}
	if vfs.sets > 0 || len(entries) != 1 || entries[0].Kind != kindVFIODevice {
		t.Errorf("%d MACs set, entries %+v; want the device alone", vfs.sets, entries)
	}
}

// TestSetVFMACIsReadBack: a PF that keeps the VF's MAC unchanged is an
// error naming both, and the device is not bound; the entry is recorded
// for the undo.
func TestSetVFMACIsReadBack(t *testing.T) {
	const addr = "0000:03:10.0"
	root := pciTree(t)
	vfs := &fakeVFs{macs: map[string]net.HardwareAddr{"enp3s0f0/0": {2, 0, 0, 0, 0x10, 0}}, frozen: true}
	fs := &fakeSysfs{t: t, root: root, probe: true}
	entries, err := lendDevice(newLedger(t), root, fs, vfs, addr, vmMAC)
	if err == nil || !strings.Contains(err.Error(), "enp3s0f0 kept MAC 02:00:00:00:10:00 for VF 0, not "+vmMAC.String()) {
		t.Errorf("got %v, want the MAC kept named", err)
	}
	if len(entries) != 1 || entries[0].Kind != kindVFMAC || len(fs.writes) > 0 {
		t.Errorf("entries %+v, sysfs writes %q; want the MAC's entry and no binding", entries, fs.writes)
	}
}

// TestVFMACUndoIsRegistered: `vfleet clean` finds the VF MAC's undo, which
// leaves a physical function the host does not have alone.
func TestVFMACUndoIsRegistered(t *testing.T) {
	e := ledger.Entry{Kind: kindVFMAC, ID: "0000:ff:1f.7", Data: map[string]string{"pf": "vfleetnopf0", "vf": "3", "mac": "00:00:00:00:00:00"}}
	if err := ledger.Undo(context.Background(), e); err != nil {
		t.Fatal(err)
	}
}
