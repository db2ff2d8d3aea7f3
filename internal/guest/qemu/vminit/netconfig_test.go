package vminit

import (
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

// testdata/cmdline-net is /proc/cmdline of a guest on the routed path.
func TestNetParamFromRecordedCmdline(t *testing.T) {
	b, err := os.ReadFile("testdata/cmdline-net")
	if err != nil {
		t.Fatal(err)
	}
	v, ok := ParseCmdline(string(b))[ParamNet]
	if !ok {
		t.Fatalf("no %s in %s", ParamNet, b)
	}
	c, err := ParseNetConfig(v)
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != netip.MustParsePrefix("198.18.32.2/30") || c.Gateway != netip.MustParseAddr("198.18.32.1") || c.MAC.String() != "02:76:01:00:00:01" {
		t.Fatalf("parsed %+v", c)
	}
	if _, ok := ParseCmdline("console=ttyS0 root=/dev/vda")[ParamNet]; ok {
		t.Fatal("a guest without a network got one")
	}
}

func TestNetConfigRoundTrip(t *testing.T) {
	mac := net.HardwareAddr{0x02, 0x76, 0x01, 0x00, 0x00, 0x01}
	for _, c := range []NetConfig{
		{Addr: netip.MustParsePrefix("198.18.32.2/30"), Gateway: netip.MustParseAddr("198.18.32.1"), MAC: mac},
		{Addr: netip.MustParsePrefix("198.18.128.16/19"), MAC: mac}, // switched: no gateway
	} {
		got, err := ParseNetConfig(c.String())
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		if got.String() != c.String() || got.Gateway.IsValid() != c.Gateway.IsValid() {
			t.Errorf("%s came back as %s", c, got)
		}
	}
}

func TestParseNetConfigRefuses(t *testing.T) {
	for _, s := range []string{
		"",
		"198.18.32.2/30,198.18.32.1", // no MAC
		"198.18.32.2/30,198.18.32.1,02:76:01:00:00:01,x",     // extra field
		"198.18.32.2,198.18.32.1,02:76:01:00:00:01",          // no prefix length
		"198.18.32.2/0,,02:76:01:00:00:01",                   // no network
		"fd00::2/64,,02:76:01:00:00:01",                      // not IPv4
		"198.18.32.2/30,198.18.33.1,02:76:01:00:00:01",       // gateway elsewhere
		"198.18.32.2/30,198.18.32.2,02:76:01:00:00:01",       // gateway is the guest
		"198.18.32.2/30,gw,02:76:01:00:00:01",                // not an address
		"198.18.32.2/30,198.18.32.1,02:76:01:00:00:01:02:03", // not Ethernet
		"198.18.32.2/30,198.18.32.1,zz:76:01:00:00:01",       // not a MAC
	} {
		if c, err := ParseNetConfig(s); err == nil {
			t.Errorf("%q accepted as %s", s, c)
		}
	}
}

func TestParseIdentityRefusesWhatCannotMakeAClone(t *testing.T) {
	seed := make([]byte, MinSeed)
	good := Identity{Hostname: "vm-1", Seed: seed, UnixNano: 1, Net: "198.18.0.18/19,,02:76:01:00:00:01", TemplateMAC: "02:7f:00:00:00:01"}
	enc := func(id Identity) string { b, _ := json.Marshal(id); return string(b) }
	if _, err := ParseIdentity(enc(good)); err != nil {
		t.Fatal(err)
	}
	for name, id := range map[string]Identity{
		"no hostname":  {Seed: seed, UnixNano: 1},
		"short seed":   {Hostname: "a", Seed: seed[:8], UnixNano: 1},
		"no clock":     {Hostname: "a", Seed: seed},
		"bad net":      {Hostname: "a", Seed: seed, UnixNano: 1, Net: "x", TemplateMAC: "02:7f:00:00:00:01"},
		"bad template": {Hostname: "a", Seed: seed, UnixNano: 1, Net: good.Net, TemplateMAC: "zz"},
	} {
		if _, err := ParseIdentity(enc(id)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := ParseIdentity("{"); err == nil {
		t.Error("broken JSON accepted")
	}
}

// A NIC lent to the VM has no driver until the guest loads one by its
// modalias; the virtio NIC, already bound, and other classes are left.
func TestDriverlessNICs(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []struct{ addr, class, driver string }{
		{"0000:00:02.0", "0x020000", "virtio-pci"},
		{"0000:00:03.0", "0x020000", ""},
		{"0000:00:04.0", "0x010802", ""},
	} {
		dev := filepath.Join(dir, d.addr)
		if err := os.MkdirAll(dev, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, content := range map[string]string{"class": d.class + "\n", "modalias": "pci:v00008086d000010EDsv" + d.addr + "\n"} {
			if err := os.WriteFile(filepath.Join(dev, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if d.driver != "" {
			if err := os.Symlink("../../../bus/pci/drivers/"+d.driver, filepath.Join(dev, "driver")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := driverlessNICs(dir); len(got) != 1 || got[0] != "pci:v00008086d000010EDsv0000:00:03.0" {
		t.Errorf("driverless NICs %q, want the one at 0000:00:03.0", got)
	}
}
