package container

import (
	"maps"
	"slices"
	"testing"

	"github.com/vfleet/vfleet/internal/testutil"
	"github.com/vfleet/vfleet/internal/tools"
)

// Each runtime the kind knows is a tool the kind registers, whose version
// a run records, read from the banner each prints.
func TestRuntimesAreRegisteredTools(t *testing.T) {
	want := map[string]string{"runc": "1.1.5+ds1", "crun": "1.8.1", "runsc": "release-20240807.0", "kata-runtime": "3.7.0"}
	if got := slices.Sorted(maps.Keys(want)); !slices.Equal(got, slices.Sorted(slices.Values(Runtimes()))) {
		t.Fatalf("runtimes %v, banners for %v", Runtimes(), got)
	}
	testutil.ToolBanners(t, want)
	// crun's banner must not pass for runc's.
	if v, err := tools.ParseVersion("runc", []byte("crun version 1.8.1\n")); err == nil {
		t.Errorf("runc accepted crun's banner as version %q", v)
	}
	if s, _ := tools.Lookup("kata-runtime"); s.Package != "" || s.Install == "" {
		t.Errorf("kata-runtime, which Debian does not ship: %+v", s)
	}
}
