package scenario

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// network.passthrough lists the devices the passthrough path's VMs take:
// read in order, each a PCI address once, as many as the VMs, and the
// host's refusals reported at the field, one error each.
func TestPassthroughField(t *testing.T) {
	const head = "name: t\nnetwork:\n  path: passthrough\n"
	const rest = "guests:\n  - {kind: host}\n  - {kind: vm, count: 2}\nworkloads:\n  - workload: scenario-test\n"
	var asked []string
	var askedVMs int
	vms := opts
	vms.KnownKinds = append(slices.Clone(opts.KnownKinds), "vm")
	o := vms
	o.CheckPassthrough = func(devices []string, vms int) error {
		asked, askedVMs = devices, vms
		return nil
	}
	s, err := Parse("t.yaml", []byte(head+"  passthrough: [0000:03:10.0, 0000:03:10.2]\n"+rest), o)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"0000:03:10.0", "0000:03:10.2"}
	if !slices.Equal(s.Network.Passthrough, want) || !slices.Equal(asked, want) || askedVMs != 2 {
		t.Errorf("devices %v, the host asked about %v for %d VMs; want %v for 2", s.Network.Passthrough, asked, askedVMs, want)
	}

	o.CheckPassthrough = func([]string, int) error {
		return errors.Join(errors.New("device 0000:03:10.0: its interface is up"), errors.New("device 0000:03:10.2: no MAC"))
	}
	for _, tc := range []struct {
		name, src string
		opts      Options
		want      []string
	}{
		{"not an address", head + "  passthrough: [03:10.0, 0000:03:10.2]\n" + rest, vms,
			[]string{`t.yaml:4:17: network.passthrough[0]: "03:10.0" is not allowed: want a PCI function's address`}},
		{"listed twice", head + "  passthrough: [0000:03:10.0, 0000:03:10.0]\n" + rest, vms,
			[]string{"t.yaml:4:31: network.passthrough[1]: 0000:03:10.0 is listed twice"}},
		{"missing", head + rest, vms,
			[]string{"t.yaml:3:3: network.passthrough: missing: the 2 VMs on the passthrough path each take a PCI device"}},
		{"too few", head + "  passthrough: [0000:03:10.0]\n" + rest, vms,
			[]string{"t.yaml:4:16: network.passthrough: 1 devices for the 2 VMs on the passthrough path"}},
		{"no VMs on the path", "name: t\nnetwork:\n  passthrough: [0000:03:10.0]\n" + rest, vms,
			[]string{"t.yaml:3:16: network.passthrough: no guest group is on the passthrough path"}},
		{"refused by the host", head + "  passthrough: [0000:03:10.0, 0000:03:10.2]\n" + rest, o,
			[]string{"t.yaml:4:16: network.passthrough: device 0000:03:10.0: its interface is up", "t.yaml:4:16: network.passthrough: device 0000:03:10.2: no MAC"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tc.src), tc.opts)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\ndoes not say %q", err, w)
				}
			}
		})
	}
}
