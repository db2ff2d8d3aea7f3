package fastpath

import (
	"fmt"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// offloadFeature is one of the legacy ethtool on/off settings, named as
// `ethtool -k` names it.
type offloadFeature struct {
	name string
	get  uint32
}

// offloadFeatures are the settings that decide how packets reach and leave
// the fast path: checksum state, and whether they come as GSO/GRO
// super-packets.
var offloadFeatures = []offloadFeature{
	{"rx-checksumming", unix.ETHTOOL_GRXCSUM},
	{"tx-checksumming", unix.ETHTOOL_GTXCSUM},
	{"scatter-gather", unix.ETHTOOL_GSG},
	{"tcp-segmentation-offload", unix.ETHTOOL_GTSO},
	{"generic-segmentation-offload", unix.ETHTOOL_GGSO},
	{"generic-receive-offload", unix.ETHTOOL_GGRO},
}

// offloads is a device's settings, by feature name; a feature the device
// would not report is missing.
type offloads map[string]bool

// String lists the settings in offloadFeatures order, e.g.
// "rx-checksumming=on tx-checksumming=off ...".
func (o offloads) String() string {
	if o == nil {
		return "unknown"
	}
	var parts []string
	for _, f := range offloadFeatures {
		v, ok := o[f.name]
		switch {
		case !ok:
			parts = append(parts, f.name+"=unknown")
		case v:
			parts = append(parts, f.name+"=on")
		default:
			parts = append(parts, f.name+"=off")
		}
	}
	return strings.Join(parts, " ")
}

// changes lists what differs from an earlier reading, e.g.
// "tx-checksumming on->off", in offloadFeatures order.
func (o offloads) changes(before offloads) string {
	var parts []string
	for _, f := range offloadFeatures {
		b, okb := before[f.name]
		a, oka := o[f.name]
		if okb && oka && a != b {
			parts = append(parts, fmt.Sprintf("%s %s->%s", f.name, onOff(b), onOff(a)))
		}
	}
	return strings.Join(parts, ", ")
}

func onOff(v bool) string {
	if v {
		return "on"
	}
	return "off"
}

// ethtoolValue is struct ethtool_value.
type ethtoolValue struct {
	cmd  uint32
	data uint32
}

// ifreqData is struct ifreq with the ifr_data member of its union; the
// padding makes it at least as large as the kernel's.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [16]byte
}

// ethtoolValueIoctl runs one SIOCETHTOOL command carrying a struct
// ethtool_value. The interface is looked up in the namespace of the socket
// fd, not of the calling thread, which is why the Set makes its ioctls on
// a socket it opened in the interface's namespace.
func ethtoolValueIoctl(fd int, ifName string, cmd, data uint32) (uint32, error) {
	if len(ifName) >= unix.IFNAMSIZ {
		return 0, fmt.Errorf("interface name %q is longer than %d bytes", ifName, unix.IFNAMSIZ-1)
	}
	v := ethtoolValue{cmd: cmd, data: data}
	var ifr ifreqData
	copy(ifr.name[:], ifName)
	ifr.data = unsafe.Pointer(&v)
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); errno != 0 {
		return 0, errno
	}
	return v.data, nil
}

// readOffloads reads every offloadFeature of ifName. A device that reports
// none (no ethtool support) yields nil, which prints as unknown.
func readOffloads(fd int, ifName string) offloads {
	o := offloads{}
	for _, f := range offloadFeatures {
		v, err := ethtoolValueIoctl(fd, ifName, f.get, 0)
		if err == nil {
			o[f.name] = v != 0
		}
	}
	if len(o) == 0 {
		return nil
	}
	return o
}

// setTxChecksum turns TX checksum offload of ifName on or off.
func setTxChecksum(fd int, ifName string, on bool) error {
	var v uint32
	if on {
		v = 1
	}
	if _, err := ethtoolValueIoctl(fd, ifName, unix.ETHTOOL_STXCSUM, v); err != nil {
		return fmt.Errorf("set tx-checksumming %s on %s: %w", onOff(on), ifName, err)
	}
	return nil
}
