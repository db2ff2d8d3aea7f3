package netpath

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/vfleet/vfleet/internal/ledger"
)

// A PCI device a VM is given (the passthrough path) is bound to vfio-pci
// for the run and back to its own driver afterwards, through sysfs as the
// kernel documents it (Documentation/driver-api/vfio.rst,
// Documentation/ABI/testing/sysfs-bus-pci). Every sysfs path is read below
// a root directory, "/" on a host, a recorded tree in tests.

// vfioDriver is the kernel driver that hands a device to user space.
const vfioDriver = "vfio-pci"

// kindVFIODevice is the ledger kind of a device lent to a VM: its ID is
// the PCI address, its data the driver it is given back to.
const kindVFIODevice = "vfio-device"

func init() {
	ledger.RegisterUndo(kindVFIODevice, func(_ context.Context, e ledger.Entry) error {
		return unbindVFIO("/", fileWrites{}, e.ID, e.Data["driver"])
	})
}

// ErrPassthroughRefused is wrapped by the error for devices the
// passthrough path cannot take from this host: the wrapping error names
// the device, or what the host lacks, and why.
var ErrPassthroughRefused = errors.New("passthrough refused")

// errDeviceHeld is wrapped by the error for a device not given back
// because a process still holds its IOMMU group open.
var errDeviceHeld = errors.New("device still held open")

// pciAddrRE is a PCI function's address as sysfs names it:
// domain:bus:device.function.
var pciAddrRE = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-1][0-9a-f]\.[0-7]$`)

// IsPCIAddress says whether s is a PCI function's full address
// (0000:03:00.1), as the passthrough path names its devices.
func IsPCIAddress(s string) bool { return pciAddrRE.MatchString(s) }

// pciClassNetwork is the PCI base class of network controllers.
const pciClassNetwork = 0x02

// pciClassBridge is the PCI base class of bridges, which the kernel lets
// stay with their drivers in a group handed to user space.
const pciClassBridge = 0x06

// groupSafeDrivers are the drivers a device may keep while another of its
// IOMMU group is with vfio-pci: the kernel's own list, with vfio-pci.
var groupSafeDrivers = []string{vfioDriver, "pci-stub", "pcieport"}

// pciDevice is what the passthrough path reads of one PCI function.
type pciDevice struct {
	Addr string
	// Class is the 24-bit class code (0x020000: an Ethernet controller).
	Class uint32
	// Driver is the bound driver's name, "" for none.
	Driver string
	// Group is the IOMMU group's number, "" when the device has none.
	Group string
	// PhysFn is the address of the physical function of a virtual one
	// (SR-IOV), "" for a physical function.
	PhysFn string
	// Ifaces are its network interfaces with their state, while a network
	// driver has it.
	Ifaces []pciIface
	// VF is where a virtual function's MAC is set; passthroughDevice
	// fills it.
	VF vfSlot
}

// pciIface is a network interface of a PCI device.
type pciIface struct {
	Name string
	MAC  net.HardwareAddr
	Up   bool
	// AssignType is where its MAC came from (addr_assign_type:
	// addrPermanent, addrRandom, addrStolen, addrSet), -1 unread.
	AssignType int
}

// The kernel's addr_assign_type values (NET_ADDR_*).
const (
	addrPermanent = 0
	addrRandom    = 1
	addrStolen    = 2
	addrSet       = 3
)

// assignTypeWhy says why a MAC that is not the device's permanent one
// would not be the VM's: its driver there reads the permanent one.
var assignTypeWhy = map[int]string{
	addrRandom: "its driver made it up at random",
	addrStolen: "it is another device's",
	addrSet:    "it was set by hand, and is lost when the device leaves its driver (ethtool -P IFACE shows the permanent one to set back)",
}

func sysPath(root string, elem ...string) string {
	return filepath.Join(append([]string{root, "sys"}, elem...)...)
}

func devicePath(root, addr string, elem ...string) string {
	return sysPath(root, append([]string{"bus/pci/devices", addr}, elem...)...)
}

// linkBase is the last element of the symbolic link at path, "" when
// there is none.
func linkBase(path string) (string, error) {
	to, err := os.Readlink(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return filepath.Base(to), nil
}

func readTrimmed(path string) (string, error) {
	b, err := os.ReadFile(path)
	return strings.TrimSpace(string(b)), err
}

// readPCIDevice reads the device at addr below root; a missing device
// wraps os.ErrNotExist.
func readPCIDevice(root, addr string) (pciDevice, error) {
	d := pciDevice{Addr: addr}
	class, err := readTrimmed(devicePath(root, addr, "class"))
	if err != nil {
		return d, err
	}
	c, err := strconv.ParseUint(class, 0, 32)
	if err != nil {
		return d, fmt.Errorf("class of %s: %w", addr, err)
	}
	d.Class = uint32(c)
	for _, f := range []struct {
		link string
		dst  *string
	}{{"driver", &d.Driver}, {"iommu_group", &d.Group}, {"physfn", &d.PhysFn}} {
		if *f.dst, err = linkBase(devicePath(root, addr, f.link)); err != nil {
			return d, err
		}
	}
	// A network driver's interfaces sit in net/, or one level down for
	// virtio's, whose driver sits on a bus of its own. Not */net/*: a
	// virtual function's physfn link leads to its physical function's.
	var dirs []string
	for _, pattern := range []string{"net/*", "virtio*/net/*"} {
		m, err := filepath.Glob(devicePath(root, addr, pattern))
		if err != nil {
			return d, err
		}
		dirs = append(dirs, m...)
	}
	for _, dir := range dirs {
		ifc := pciIface{Name: filepath.Base(dir), AssignType: -1}
		if mac, err := readTrimmed(filepath.Join(dir, "address")); err == nil {
			ifc.MAC, _ = net.ParseMAC(mac)
		}
		if t, err := readTrimmed(filepath.Join(dir, "addr_assign_type")); err == nil {
			if v, err := strconv.Atoi(t); err == nil {
				ifc.AssignType = v
			}
		}
		if flags, err := readTrimmed(filepath.Join(dir, "flags")); err == nil {
			if v, err := strconv.ParseUint(flags, 0, 32); err == nil {
				ifc.Up = v&uint64(net.FlagUp) != 0
			}
		}
		d.Ifaces = append(d.Ifaces, ifc)
	}
	return d, nil
}

// groupMembers are the addresses of the devices in IOMMU group g.
func groupMembers(root, g string) ([]string, error) {
	entries, err := os.ReadDir(sysPath(root, "kernel/iommu_groups", g, "devices"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out, nil
}

// CheckPassthroughHost says whether this host (below root, "/" for the
// real one) can give devices to VMs at all: an IOMMU on, the vfio-pci
// driver loaded and vfio's container device present.
func CheckPassthroughHost(root string) error {
	groups, err := os.ReadDir(sysPath(root, "kernel/iommu_groups"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read the IOMMU groups: %w", err)
	}
	if len(groups) == 0 {
		return fmt.Errorf("%w: the host has no IOMMU (/sys/kernel/iommu_groups is empty): turn VT-d or AMD-Vi on in the firmware "+
			"and boot with intel_iommu=on or amd_iommu=on", ErrPassthroughRefused)
	}
	if _, err := os.Stat(sysPath(root, "bus/pci/drivers", vfioDriver)); err != nil {
		return fmt.Errorf("%w: the %s driver is not loaded (no /sys/bus/pci/drivers/%s): modprobe %s", ErrPassthroughRefused, vfioDriver, vfioDriver, vfioDriver)
	}
	if _, err := os.Stat(filepath.Join(root, "dev/vfio/vfio")); err != nil {
		return fmt.Errorf("%w: /dev/vfio/vfio is absent: modprobe %s", ErrPassthroughRefused, vfioDriver)
	}
	return nil
}

// CheckPassthrough says whether the devices at addrs (PCI addresses) can
// be given to vms VMs, one each, on this host below root: the host can
// give devices at all (CheckPassthroughHost), there are enough, and each
// is a network device of the host's, in an IOMMU group of its own as far
// as vfio cares, with a MAC address, not in use by the host and not given
// away already. Every refusal wraps ErrPassthroughRefused and says which.
func CheckPassthrough(root string, addrs []string, vms int) error {
	if err := CheckPassthroughHost(root); err != nil {
		return err
	}
	if len(addrs) < vms {
		return fmt.Errorf("%w: %d VMs are on the %s path and %d devices are listed: each VM takes one", ErrPassthroughRefused, vms, Passthrough, len(addrs))
	}
	var errs []error
	for i, addr := range addrs {
		if slices.Contains(addrs[:i], addr) {
			errs = append(errs, fmt.Errorf("%w: device %s is listed twice: each VM takes a device of its own", ErrPassthroughRefused, addr))
			continue
		}
		d, err := passthroughDevice(root, addr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := checkGroup(root, d, addrs); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// passthroughDevice reads the device at addr and refuses one the path
// cannot take on its own. A physical function's VM keeps its permanent
// MAC, its first interface's; a virtual function's is set through its
// physical function (d.VF) when it is lent.
func passthroughDevice(root, addr string) (pciDevice, error) {
	refuse := func(format string, a ...any) error {
		return fmt.Errorf("%w: device %s: %s", ErrPassthroughRefused, addr, fmt.Sprintf(format, a...))
	}
	if !IsPCIAddress(addr) {
		return pciDevice{}, refuse("not a PCI address (want domain:bus:device.function, like 0000:03:00.1)")
	}
	d, err := readPCIDevice(root, addr)
	if errors.Is(err, os.ErrNotExist) {
		return d, refuse("no such PCI device (lspci -D lists the host's)")
	}
	if err != nil {
		return d, refuse("%v", err)
	}
	if d.Class>>16 != pciClassNetwork {
		return d, refuse("class %#06x is not a network controller (0x02xxxx)", d.Class)
	}
	if d.Group == "" {
		return d, refuse("it is in no IOMMU group: the IOMMU does not cover it")
	}
	if d.Driver == vfioDriver {
		return d, refuse("it is bound to %s already: another VM may have it, or a run that crashed left it so; "+
			"run `vfleet clean`, which gives back what a run's ledger still holds, and only if it is still bound after that, "+
			"bind it back to its own driver by hand", vfioDriver)
	}
	for _, ifc := range d.Ifaces {
		if ifc.Up {
			return d, refuse("its interface %s is up: the host uses it; set it down (ip link set %s down) to lend it", ifc.Name, ifc.Name)
		}
	}
	if d.PhysFn != "" {
		if d.VF, err = readVFSlot(root, d); err != nil {
			return d, refuse("%v", err)
		}
		return d, nil
	}
	if len(d.Ifaces) == 0 {
		driver := "no driver"
		if d.Driver != "" {
			driver = "driver " + d.Driver
		}
		return d, refuse("it has no network interface (%s): bind it to its network driver, whose interface gives the VM's NIC its MAC", driver)
	}
	ifc := d.Ifaces[0]
	if len(ifc.MAC) != 6 || slices.Equal(ifc.MAC, make(net.HardwareAddr, 6)) {
		return d, refuse("its interface %s has no MAC address, which the VM finds its NIC by", ifc.Name)
	}
	if ifc.AssignType != addrPermanent {
		why, ok := assignTypeWhy[ifc.AssignType]
		if !ok {
			why = fmt.Sprintf("its origin is unknown (addr_assign_type %d)", ifc.AssignType)
		}
		return d, refuse("the MAC %s of its interface %s is not the device's permanent one, which its driver in the VM reads and the VM finds its NIC by: %s", ifc.MAC, ifc.Name, why)
	}
	return d, nil
}

// checkGroup refuses a device whose IOMMU group holds a device vfio would
// not let stay on the host: one with a driver other than the kernel's safe
// ones (bridges aside), or one listed for another VM, as a group goes
// to one VM whole.
func checkGroup(root string, d pciDevice, listed []string) error {
	members, err := groupMembers(root, d.Group)
	if err != nil {
		return fmt.Errorf("%w: device %s: IOMMU group %s: %v", ErrPassthroughRefused, d.Addr, d.Group, err)
	}
	var bound, listedToo []string
	for _, m := range members {
		if m == d.Addr {
			continue
		}
		if slices.Contains(listed, m) {
			listedToo = append(listedToo, m)
			continue
		}
		o, err := readPCIDevice(root, m)
		if err != nil {
			bound = append(bound, fmt.Sprintf("%s cannot be read (%v)", m, err))
			continue
		}
		if o.Driver == "" || o.Class>>16 == pciClassBridge || slices.Contains(groupSafeDrivers, o.Driver) {
			continue
		}
		bound = append(bound, fmt.Sprintf("%s is bound to %s", m, o.Driver))
	}
	var errs []error
	if len(bound) > 0 {
		errs = append(errs, fmt.Errorf("%w: device %s: its IOMMU group %s is not its own: %s (unbind those, or put the device in a slot of its own)",
			ErrPassthroughRefused, d.Addr, d.Group, strings.Join(bound, "; ")))
	}
	if len(listedToo) > 0 {
		errs = append(errs, fmt.Errorf("%w: device %s: its IOMMU group %s holds %s, listed too: a group goes to one VM whole, so list one device of it",
			ErrPassthroughRefused, d.Addr, d.Group, strings.Join(listedToo, ", ")))
	}
	return errors.Join(errs...)
}

// sysfsWrites is how the binding changes sysfs: one write of value to the
// attribute at path.
type sysfsWrites interface {
	Write(path, value string) error
}

// fileWrites writes sysfs attributes for real.
type fileWrites struct{}

func (fileWrites) Write(path, value string) error {
	// An attribute exists or the kernel has no such thing: never create.
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	return errors.Join(err, f.Close())
}

// bindVFIO records the device at addr and its driver in the ledger, then
// gives it to vfio-pci as the kernel documents: the override first, so
// that no other driver takes it in between, then away from its driver,
// then probed again. It checks that vfio-pci has it.
func bindVFIO(led *ledger.Ledger, root string, w sysfsWrites, addr string) (ledger.Entry, error) {
	d, err := readPCIDevice(root, addr)
	if err != nil {
		return ledger.Entry{}, fmt.Errorf("device %s: %w", addr, err)
	}
	e, err := led.Record(kindVFIODevice, addr, map[string]string{"driver": d.Driver})
	if err != nil {
		return ledger.Entry{}, err
	}
	steps := [][2]string{{devicePath(root, addr, "driver_override"), vfioDriver}}
	if d.Driver != "" {
		steps = append(steps, [2]string{sysPath(root, "bus/pci/drivers", d.Driver, "unbind"), addr})
	}
	steps = append(steps, [2]string{sysPath(root, "bus/pci/drivers_probe"), addr})
	for _, s := range steps {
		if err := w.Write(s[0], s[1]); err != nil {
			return e, fmt.Errorf("bind %s to %s: write %q to %s: %w", addr, vfioDriver, s[1], s[0], err)
		}
	}
	return e, expectDriver(root, addr, vfioDriver)
}

// unbindVFIO gives the device at addr back to driver, its own before
// bindVFIO ("" for none): away from vfio-pci, the override cleared, probed
// again; it checks that driver has it. A device that is gone, or was never
// taken, is left alone; one whose IOMMU group a process (a VM that
// survived its stop) holds open is left bound, with an error wrapping
// errDeviceHeld, as unbinding it would block until that process let go.
func unbindVFIO(root string, w sysfsWrites, addr, driver string) error {
	d, err := readPCIDevice(root, addr)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("device %s: %w", addr, err)
	}
	override, err := readTrimmed(devicePath(root, addr, "driver_override"))
	if err != nil {
		return fmt.Errorf("device %s: %w", addr, err)
	}
	if d.Driver != vfioDriver && override != vfioDriver {
		return nil
	}
	var steps [][2]string
	if d.Driver == vfioDriver {
		holders, err := groupHolders(root, d.Group)
		if err != nil {
			return fmt.Errorf("device %s: %w", addr, err)
		}
		if len(holders) > 0 {
			return fmt.Errorf("%w: device %s: held through /dev/vfio/%s by %s: left with %s and in the ledger; run `vfleet clean` once that is gone",
				errDeviceHeld, addr, d.Group, strings.Join(holders, ", "), vfioDriver)
		}
		steps = append(steps, [2]string{sysPath(root, "bus/pci/drivers", vfioDriver, "unbind"), addr})
	}
	// A newline clears the override (the kernel drops it, leaving "").
	steps = append(steps, [2]string{devicePath(root, addr, "driver_override"), "\n"},
		[2]string{sysPath(root, "bus/pci/drivers_probe"), addr})
	for _, s := range steps {
		if err := w.Write(s[0], s[1]); err != nil {
			return fmt.Errorf("give %s back to %s: write %q to %s: %w", addr, cmp.Or(driver, "no driver"), s[1], s[0], err)
		}
	}
	if driver == "" {
		return nil
	}
	return expectDriver(root, addr, driver)
}

// groupHolders are the processes below root that hold IOMMU group g's
// /dev/vfio/g open, each as "pid PID (COMMAND)".
func groupHolders(root, g string) ([]string, error) {
	if g == "" {
		return nil, nil
	}
	fds, err := filepath.Glob(filepath.Join(root, "proc/[0-9]*/fd/*"))
	if err != nil {
		return nil, err
	}
	want := "/dev/vfio/" + g
	var holders []string
	for _, fd := range fds {
		// A process or descriptor gone since the glob holds nothing.
		if to, err := os.Readlink(fd); err != nil || to != want {
			continue
		}
		procDir := filepath.Dir(filepath.Dir(fd))
		comm, _ := readTrimmed(filepath.Join(procDir, "comm"))
		h := fmt.Sprintf("pid %s (%s)", filepath.Base(procDir), cmp.Or(comm, "gone"))
		if !slices.Contains(holders, h) {
			holders = append(holders, h)
		}
	}
	return holders, nil
}

// expectDriver checks that driver has the device at addr.
func expectDriver(root, addr, driver string) error {
	got, err := linkBase(devicePath(root, addr, "driver"))
	if err != nil {
		return fmt.Errorf("device %s: %w", addr, err)
	}
	if got != driver {
		return fmt.Errorf("device %s: %s did not take it (its driver is %q)", addr, driver, got)
	}
	return nil
}
