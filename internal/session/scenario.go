package session

import (
	"context"
	"time"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/netpath"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/tools"
)

// ScenarioOptions check a scenario against the kinds compiled in, the
// images its groups name and the devices it lends to VMs (read from this
// host's sysfs, changing nothing); users' OCI images already unpacked
// under stateDir are not read again.
func ScenarioOptions(stateDir string) scenario.Options {
	return scenario.Options{KnownKinds: guest.KindNames(), CheckGuest: checkGuest,
		CheckImage:       func(spec guest.Spec) error { return checkImage(stateDir, spec) },
		CheckPassthrough: func(devices []string, vms int) error { return netpath.CheckPassthrough("/", devices, vms) }}
}

// ElsewhereOptions check a scenario another machine runs (`capacity
// --on`) as far as this one can: its structure against the kinds compiled
// in; its CPUs and memory, the images and devices it names are that
// machine's, which checks them itself.
func ElsewhereOptions() scenario.Options {
	return scenario.Options{KnownKinds: guest.KindNames(), Elsewhere: true}
}

// checkImage says whether a guest of spec can run its image: a VM boots a
// disk QEMU can read, the others run an OCI image's root file system,
// whose blobs all match their descriptors unless it is unpacked under
// stateDir already. Without qemu-img, the kind's probe says what to
// install.
func checkImage(stateDir string, spec guest.Spec) error {
	path := spec.Image
	if !guest.TraitsOf(spec).BootsDisk {
		return image.CheckOCI(stateDir, path)
	}
	qemuImg, err := tools.Find("qemu-img")
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = image.InspectDisk(ctx, qemuImg.Path, path)
	return err
}

// checkGuest asks the group's kind to accept it; New touches nothing on
// the host, so this is safe while parsing.
func checkGuest(g scenario.GuestGroup) error {
	k, err := guest.Lookup(g.Kind)
	if err != nil {
		return err
	}
	for _, s := range g.Variants() {
		s.Name = g.Name
		if _, err := k.New(s, guest.Env{}); err != nil {
			return err
		}
	}
	return nil
}
