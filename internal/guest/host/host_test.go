package host

import (
	"testing"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/guest/guesttest"
	"github.com/vfleet/vfleet/internal/testutil"
)

func TestConformance(t *testing.T) {
	testutil.RequiresRoot(t)
	img := testutil.Image(t)
	k, err := guest.Lookup(KindName)
	if err != nil {
		t.Fatal(err)
	}
	guesttest.Run(t, guesttest.Options{Kind: k, RootFS: img.RootFS, AgentPath: img.AgentPath})
}

func TestLimitsAreRefused(t *testing.T) {
	k, _ := guest.Lookup(KindName)
	for _, spec := range []guest.Spec{{Name: "h", CPUs: "0"}, {Name: "h", MemoryBytes: 1 << 20}, {Name: "h", Runtime: "runc"}} {
		if _, err := k.New(spec, guest.Env{}); err == nil {
			t.Errorf("host baseline accepted %+v", spec)
		}
	}
}
