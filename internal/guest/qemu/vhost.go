package qemu

import (
	"errors"
	"io/fs"
	"os"
)

// VhostNetDevice is the kernel's in-kernel virtio-net backend: with it the
// guest's packets are moved by a kernel thread, not by QEMU's own.
const VhostNetDevice = "/dev/vhost-net"

// openVhostNet opens the vhost-net device for one VM's NIC, under KVM
// only: that is where users' hosts use it, and vfleet does not present an
// emulated VM's network figures as what KVM would do. why says, when f is
// nil, why the NIC goes without.
func openVhostNet(accel, device string) (f *os.File, why string) {
	if accel != AccelKVM {
		return nil, "off: used with KVM only, this VM runs under " + accel
	}
	f, err := os.OpenFile(device, os.O_RDWR, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, "off: " + device + " is absent (no vhost_net module in this kernel)"
	case err != nil:
		return nil, "off: " + err.Error()
	}
	return f, "on"
}
