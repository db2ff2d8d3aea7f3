package vminit

import (
	"encoding/json"
	"net"
	"net/netip"
	"os"
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
