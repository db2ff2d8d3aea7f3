package netpath

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/ledger"
)

// pciTree builds the recorded sysfs tree testdata/sysfs-pci.tree in a
// directory of the test's own, which it returns as the root.
func pciTree(t *testing.T) string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "sysfs-pci.tree"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	root := t.TempDir()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var path string
		var err error
		if p, target, ok := strings.Cut(line, " -> "); ok {
			path = filepath.Join(root, p)
			if err = os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
				err = os.Symlink(target, path)
			}
		} else if p, content, ok := strings.Cut(line, " ="); ok {
			path = filepath.Join(root, p)
			content = strings.ReplaceAll(strings.TrimPrefix(content, " "), `\n`, "\n")
			if err = os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
				err = os.WriteFile(path, []byte(content), 0o644)
			}
		} else {
			t.Fatalf("sysfs-pci.tree: bad line %q", line)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestCheckPassthroughRefusals holds each refusal of the passthrough path
// to the recorded tree: what the host lacks, and each device it cannot
// lend, named with why; devices it can lend pass.
func TestCheckPassthroughRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(root string) error
		addrs  []string
		vms    int
		want   []string // in the error; none: accepted
	}{
		{name: "a whole NIC", addrs: []string{"0000:03:00.1"}, vms: 1},
		{name: "a virtual function", addrs: []string{"0000:03:10.0"}, vms: 1},
		{name: "more devices than VMs", addrs: []string{"0000:03:00.1", "0000:03:10.0"}, vms: 1},
		{name: "a virtio NIC, its interface below the device", addrs: []string{"0000:09:00.0"}, vms: 1},
		{name: "no IOMMU", change: removeAll("sys/kernel/iommu_groups"), addrs: []string{"0000:03:00.1"}, vms: 1,
			want: []string{"no IOMMU", "intel_iommu=on"}},
		{name: "no vfio-pci driver", change: removeAll("sys/bus/pci/drivers/vfio-pci"), addrs: []string{"0000:03:00.1"}, vms: 1,
			want: []string{"vfio-pci driver is not loaded", "modprobe vfio-pci"}},
		{name: "no vfio device", change: removeAll("dev/vfio"), addrs: []string{"0000:03:00.1"}, vms: 1,
			want: []string{"/dev/vfio/vfio is absent"}},
		{name: "fewer devices than VMs", addrs: []string{"0000:03:00.1"}, vms: 2, want: []string{"2 VMs", "1 devices"}},
		{name: "no such device", addrs: []string{"0000:0a:00.0"}, vms: 1, want: []string{"0000:0a:00.0", "no such PCI device"}},
		{name: "not an address", addrs: []string{"03:00.1"}, vms: 1, want: []string{"03:00.1", "not a PCI address"}},
		{name: "a disk", addrs: []string{"0000:04:00.0"}, vms: 1, want: []string{"0000:04:00.0", "0x010802 is not a network controller"}},
		{name: "in use by the host", addrs: []string{"0000:03:00.0"}, vms: 1, want: []string{"0000:03:00.0", "enp3s0f0 is up"}},
		{name: "a virtual function without a MAC: it gets one when lent", addrs: []string{"0000:03:10.2"}, vms: 1},
		{name: "a virtual function with no driver", change: removeAll("sys/bus/pci/devices/0000:03:10.0/driver"), addrs: []string{"0000:03:10.0"}, vms: 1},
		{name: "a virtual function whose physical function has no interface", change: removeAll("sys/bus/pci/devices/0000:03:00.0/net"),
			addrs: []string{"0000:03:10.0"}, vms: 1, want: []string{"0000:03:10.0", "physical function 0000:03:00.0 has no network interface"}},
		{name: "a virtual function its physical function does not list", change: removeAll("sys/bus/pci/devices/0000:03:00.0/virtfn0"),
			addrs: []string{"0000:03:10.0"}, vms: 1, want: []string{"0000:03:10.0", "0000:03:00.0 does not list it"}},
		{name: "a whole NIC with a random MAC", change: assignType("0000:03:00.1/net/enp3s0f1", addrRandom), addrs: []string{"0000:03:00.1"}, vms: 1,
			want: []string{"0000:03:00.1", "00:1b:21:aa:bb:01 of its interface enp3s0f1 is not the device's permanent one", "at random"}},
		{name: "a whole NIC with a MAC set by hand", change: assignType("0000:03:00.1/net/enp3s0f1", addrSet), addrs: []string{"0000:03:00.1"}, vms: 1,
			want: []string{"0000:03:00.1", "not the device's permanent one", "set by hand", "ethtool -P"}},
		{name: "a whole NIC without a MAC", change: writeFile("sys/bus/pci/devices/0000:03:00.1/net/enp3s0f1/address", "00:00:00:00:00:00\n"),
			addrs: []string{"0000:03:00.1"}, vms: 1, want: []string{"0000:03:00.1", "enp3s0f1 has no MAC address"}},
		{name: "a group shared with a USB controller", addrs: []string{"0000:05:00.0"}, vms: 1,
			want: []string{"0000:05:00.0", "IOMMU group 31 is not its own", "0000:05:00.1 is bound to xhci_hcd"}},
		{name: "one group for two VMs", addrs: []string{"0000:07:00.0", "0000:07:00.1"}, vms: 2,
			want: []string{"0000:07:00.0: its IOMMU group 50 holds 0000:07:00.1, listed too", "0000:07:00.1: its IOMMU group 50 holds 0000:07:00.0"}},
		{name: "taken already", addrs: []string{"0000:06:00.0"}, vms: 1, want: []string{"0000:06:00.0", "bound to vfio-pci already", "run `vfleet clean`"}},
		{name: "no driver", addrs: []string{"0000:08:00.0"}, vms: 1, want: []string{"0000:08:00.0", "no network interface (no driver)"}},
		{name: "listed twice", addrs: []string{"0000:03:00.1", "0000:03:00.1"}, vms: 2, want: []string{"0000:03:00.1 is listed twice"}},
		{name: "outside the IOMMU", change: removeAll("sys/bus/pci/devices/0000:03:00.1/iommu_group"), addrs: []string{"0000:03:00.1"}, vms: 1,
			want: []string{"0000:03:00.1", "in no IOMMU group"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := pciTree(t)
			if tc.change != nil {
				if err := tc.change(root); err != nil {
					t.Fatal(err)
				}
			}
			err := CheckPassthrough(root, tc.addrs, tc.vms)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrPassthroughRefused) {
				t.Fatalf("got %v, want ErrPassthroughRefused", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\ndoes not say %q", err, w)
				}
			}
		})
	}
}

func removeAll(rel string) func(string) error {
	return func(root string) error { return os.RemoveAll(filepath.Join(root, rel)) }
}

func writeFile(rel, content string) func(string) error {
	return func(root string) error { return os.WriteFile(filepath.Join(root, rel), []byte(content), 0o644) }
}

// assignType says where the MAC of the interface at rel, below the
// device, came from.
func assignType(rel string, t int) func(string) error {
	return writeFile(filepath.Join("sys/bus/pci/devices", rel, "addr_assign_type"), strconv.Itoa(t)+"\n")
}

// TestPassthroughDeviceMAC: a whole NIC's VM keeps the device's permanent
// MAC, read before the device leaves its driver; a virtual function's MAC
// is set through its physical function, found by its virtfnN link.
func TestPassthroughDeviceMAC(t *testing.T) {
	root := pciTree(t)
	for addr, want := range map[string]string{"0000:03:00.1": "00:1b:21:aa:bb:01", "0000:09:00.0": "52:54:00:12:34:56"} {
		d, err := passthroughDevice(root, addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.Ifaces[0].MAC.String(); got != want {
			t.Errorf("%s: MAC %s, want %s", addr, got, want)
		}
	}
	for addr, want := range map[string]vfSlot{"0000:03:10.0": {PF: "enp3s0f0", Index: 0}, "0000:03:10.2": {PF: "enp3s0f0", Index: 1}} {
		d, err := passthroughDevice(root, addr)
		if err != nil {
			t.Fatal(err)
		}
		if d.VF != want {
			t.Errorf("%s: set through %+v, want %+v", addr, d.VF, want)
		}
	}
}

// fakeSysfs records the writes to a recorded tree and does what the
// kernel does on them: an unbind drops the device's driver link,
// driver_override is kept, and a probe binds the override, or else the
// device's native driver (none when probe is off: a driver that will not
// take the device).
type fakeSysfs struct {
	t      *testing.T
	root   string
	native map[string]string // by PCI address
	probe  bool
	writes []string // "PATH=VALUE", PATH below root
	// before, when set, runs before each write.
	before func()
}

func (f *fakeSysfs) Write(path, value string) error {
	if f.before != nil {
		f.before()
	}
	rel, err := filepath.Rel(f.root, path)
	if err != nil {
		return err
	}
	f.writes = append(f.writes, rel+"="+value)
	if _, err := os.Stat(path); err != nil {
		return err // sysfs has no such attribute
	}
	switch {
	case filepath.Base(path) == "driver_override":
		return os.WriteFile(path, []byte(strings.TrimSpace(value)), 0o644)
	case filepath.Base(path) == "unbind":
		return os.Remove(devicePath(f.root, value, "driver"))
	case rel == "sys/bus/pci/drivers_probe" && f.probe:
		override, err := readTrimmed(devicePath(f.root, value, "driver_override"))
		if err != nil {
			return err
		}
		driver := f.native[value]
		if override != "" && override != "(null)" {
			driver = override
		}
		if driver == "" {
			return nil
		}
		link := devicePath(f.root, value, "driver")
		if _, err := os.Lstat(link); err == nil {
			return nil // bound already: a probe leaves it
		}
		return os.Symlink(sysPath(f.root, "bus/pci/drivers", driver), link)
	}
	return nil
}

// TestBindVFIOAndBack: a virtual function goes to vfio-pci by the
// kernel's documented writes, in order, after its driver is in the
// ledger; the undo writes its way back and its driver has it again.
func TestBindVFIOAndBack(t *testing.T) {
	const addr = "0000:03:10.0"
	root := pciTree(t)
	led := newLedger(t)
	fs := &fakeSysfs{t: t, root: root, native: map[string]string{addr: "ixgbevf"}, probe: true}
	fs.before = func() {
		if len(led.Pending()) == 0 {
			t.Error("sysfs written before the device is in the ledger")
		}
	}
	e, err := bindVFIO(led, root, fs, addr)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"sys/bus/pci/devices/" + addr + "/driver_override=vfio-pci",
		"sys/bus/pci/drivers/ixgbevf/unbind=" + addr,
		"sys/bus/pci/drivers_probe=" + addr,
	}
	if !slices.Equal(fs.writes, want) {
		t.Errorf("bind wrote\n%q\nwant\n%q", fs.writes, want)
	}
	if e.Kind != kindVFIODevice || e.ID != addr || e.Data["driver"] != "ixgbevf" {
		t.Errorf("ledger entry %+v, want the device and its driver ixgbevf", e)
	}
	fs.writes, fs.before = nil, nil
	if err := unbindVFIO(root, fs, e.ID, e.Data["driver"]); err != nil {
		t.Fatal(err)
	}
	want = []string{
		"sys/bus/pci/drivers/vfio-pci/unbind=" + addr,
		"sys/bus/pci/devices/" + addr + "/driver_override=\n",
		"sys/bus/pci/drivers_probe=" + addr,
	}
	if !slices.Equal(fs.writes, want) {
		t.Errorf("undo wrote\n%q\nwant\n%q", fs.writes, want)
	}
	if err := expectDriver(root, addr, "ixgbevf"); err != nil {
		t.Error(err)
	}
	// Undone twice (a crash after the undo, before the ledger knew): the
	// device is its driver's, and nothing is written.
	fs.writes = nil
	if err := unbindVFIO(root, fs, e.ID, e.Data["driver"]); err != nil || len(fs.writes) > 0 {
		t.Errorf("second undo: %v, wrote %q", err, fs.writes)
	}
}

// TestBindVFIOWithoutDriver: a device no driver has needs no unbind, and
// goes back to no driver.
func TestBindVFIOWithoutDriver(t *testing.T) {
	const addr = "0000:08:00.0"
	root := pciTree(t)
	fs := &fakeSysfs{t: t, root: root, probe: true}
	e, err := bindVFIO(newLedger(t), root, fs, addr)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs.writes) != 2 || e.Data["driver"] != "" {
		t.Errorf("bind wrote %q, recorded %+v; want the override and a probe, and no driver", fs.writes, e)
	}
	if err := unbindVFIO(root, fs, addr, ""); err != nil {
		t.Fatal(err)
	}
	if got, _ := linkBase(devicePath(root, addr, "driver")); got != "" {
		t.Errorf("device went to %s, want no driver as before", got)
	}
}

// TestBindVFIOChecksTheDrivers: a probe that binds nothing is an error on
// the way there (vfio-pci did not take it) and back (its own driver did
// not), each naming the driver; a device gone is nothing to undo.
func TestBindVFIOChecksTheDrivers(t *testing.T) {
	const addr = "0000:03:00.1"
	root := pciTree(t)
	fs := &fakeSysfs{t: t, root: root}
	led := newLedger(t)
	e, err := bindVFIO(led, root, fs, addr)
	if err == nil || !strings.Contains(err.Error(), "vfio-pci did not take it") {
		t.Errorf("bind with no probe: %v, want vfio-pci named", err)
	}
	if e.Kind == "" || len(led.Pending()) != 1 {
		t.Errorf("the device is not in the ledger after a failed bind: %+v", led.Pending())
	}
	// As if vfio-pci had it: the undo runs, and ixgbe does not take it.
	if err := os.Symlink(sysPath(root, "bus/pci/drivers", vfioDriver), devicePath(root, addr, "driver")); err != nil {
		t.Fatal(err)
	}
	if err := unbindVFIO(root, fs, addr, "ixgbe"); err == nil || !strings.Contains(err.Error(), "ixgbe did not take it") {
		t.Errorf("undo with no probe: %v, want ixgbe named", err)
	}
	if err := os.RemoveAll(filepath.Join(root, "sys/bus/pci/devices", addr)); err != nil {
		t.Fatal(err)
	}
	fs.writes = nil
	if err := unbindVFIO(root, fs, addr, "ixgbe"); err != nil || len(fs.writes) > 0 {
		t.Errorf("undo of a device gone: %v, wrote %q", err, fs.writes)
	}
}

// TestVFIOUndoIsRegistered: `vfleet clean` finds the device's undo, which
// leaves a device the host does not have alone.
func TestVFIOUndoIsRegistered(t *testing.T) {
	e := ledger.Entry{Kind: kindVFIODevice, ID: "0000:ff:1f.7", Data: map[string]string{"driver": "ixgbevf"}}
	if err := ledger.Undo(context.Background(), e); err != nil {
		t.Fatal(err)
	}
}

// TestUnbindVFIOLeavesAHeldDevice: a device whose IOMMU group a process
// (a VM that survived its stop) holds open is not unbound, which would
// block until the process let go: the undo fails naming the process and
// `vfleet clean`, writing nothing, so the ledger keeps the entry. Once the
// process is gone, the same undo gives the device back.
func TestUnbindVFIOLeavesAHeldDevice(t *testing.T) {
	const addr = "0000:03:10.0" // IOMMU group 20
	root := pciTree(t)
	fs := &fakeSysfs{t: t, root: root, native: map[string]string{addr: "ixgbevf"}, probe: true}
	e, err := bindVFIO(newLedger(t), root, fs, addr)
	if err != nil {
		t.Fatal(err)
	}
	proc := filepath.Join(root, "proc/4242")
	for _, err := range []error{
		os.MkdirAll(filepath.Join(proc, "fd"), 0o755),
		os.WriteFile(filepath.Join(proc, "comm"), []byte("qemu-system-x86\n"), 0o644),
		os.Symlink("/dev/null", filepath.Join(proc, "fd/0")),
		os.Symlink("/dev/vfio/20", filepath.Join(proc, "fd/17")),
		os.Symlink("/dev/vfio/200", filepath.Join(proc, "fd/18")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	fs.writes = nil
	err = unbindVFIO(root, fs, e.ID, e.Data["driver"])
	if !errors.Is(err, errDeviceHeld) || !strings.Contains(err.Error(), "pid 4242 (qemu-system-x86)") || !strings.Contains(err.Error(), "vfleet clean") {
		t.Errorf("got %v, want errDeviceHeld naming the process and vfleet clean", err)
	}
	if len(fs.writes) > 0 {
		t.Errorf("wrote %q to a device still held", fs.writes)
	}
	if err := os.Remove(filepath.Join(proc, "fd/17")); err != nil {
		t.Fatal(err)
	}
	if err := unbindVFIO(root, fs, e.ID, e.Data["driver"]); err != nil {
		t.Fatal(err)
	}
	if err := expectDriver(root, addr, "ixgbevf"); err != nil {
		t.Error(err)
	}
}
