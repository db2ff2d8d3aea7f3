package host

import (
	"testing"

	"github.com/vfleet/vfleet/internal/guest"
)

func TestLimitsAreRefused(t *testing.T) {
	k, _ := guest.Lookup(KindName)
	for _, spec := range []guest.Spec{{Name: "h", CPUs: "0"}, {Name: "h", MemoryBytes: 1 << 20}, {Name: "h", Runtime: "runc"}} {
		if _, err := k.New(spec, guest.Env{}); err == nil {
			t.Errorf("host baseline accepted %+v", spec)
		}
	}
}
