package hostinfo

import (
	"os"
	"strings"
	"testing"
)

func TestParseEthtoolDriver(t *testing.T) {
	f, err := os.Open("testdata/ethtool/driver-veth.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, err := ParseEthtoolDriver(f)
	if err != nil || n.Driver != "veth" || n.Version != "1.0" || n.Firmware != "" {
		t.Errorf("ParseEthtoolDriver = %+v, %v; want veth 1.0, no firmware", n, err)
	}
	if _, err := ParseEthtoolDriver(strings.NewReader("Cannot get driver information: Operation not supported\n")); err == nil {
		t.Error("no driver line: want an error")
	}
}

func TestParseEthtoolFeatures(t *testing.T) {
	f, err := os.Open("testdata/ethtool/features-veth.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := ParseEthtoolFeatures(f)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"rx-checksumming": "on", "tcp-segmentation-offload": "on",
		"generic-receive-offload": "off", "large-receive-offload": "off [fixed]",
	} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
	// A part of a feature is not one of its own.
	if _, ok := got["tx-checksum-ipv4"]; ok {
		t.Error("tx-checksum-ipv4, an indented part, recorded as a feature")
	}
	if _, err := ParseEthtoolFeatures(strings.NewReader("")); err == nil {
		t.Error("empty output: want an error")
	}
}
