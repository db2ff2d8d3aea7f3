package vminit

import (
	"encoding/binary"
	"testing"
)

func TestPortByName(t *testing.T) {
	if got := PortByName("testdata/sys-virtio-ports", "vfleet.agent"); got != "vport0p2" {
		t.Fatalf("got %q", got)
	}
	if got := PortByName("testdata/sys-virtio-ports", "nope"); got != "" {
		t.Fatalf("unknown port found: %q", got)
	}
}

func TestIsPowerKeyPress(t *testing.T) {
	ev := func(typ, code uint16, value int32) []byte {
		b := make([]byte, inputEventSize)
		binary.LittleEndian.PutUint16(b[16:], typ)
		binary.LittleEndian.PutUint16(b[18:], code)
		binary.LittleEndian.PutUint32(b[20:], uint32(value))
		return b
	}
	if !IsPowerKeyPress(ev(evKey, keyPower, 1)) {
		t.Error("press not seen")
	}
	for _, b := range [][]byte{ev(evKey, keyPower, 0), ev(evKey, 115, 1), ev(0, keyPower, 1), ev(evKey, keyPower, 1)[:10]} {
		if IsPowerKeyPress(b) {
			t.Errorf("%v taken for a press", b)
		}
	}
}
