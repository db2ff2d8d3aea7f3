package testutil

import (
	"os"
	"testing"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/image"
)

// TestPrepareFixtures builds the images and disks the integration tests
// use, when VFLEET_TEST_PREPARE is set. scripts/test.sh runs it beside the
// build, the static checks and the first packages' tests, so that on a
// fresh machine a test that needs a fixture finds it built (or waits on
// its lock for the rest of its build) instead of building it in its turn
// at the machine, while every other integration test waits.
func TestPrepareFixtures(t *testing.T) {
	if os.Getenv("VFLEET_TEST_PREPARE") == "" {
		t.Skip("set VFLEET_TEST_PREPARE=1 to build the integration tests' fixtures")
	}
	if os.Geteuid() != 0 {
		t.Skip("building images needs root")
	}
	// Two at a time (-parallel 2), in the order the tests need them: the
	// default image first, which most of them boot, and a user's OCI
	// image, which the first pass of scripts/test.sh uses too; the rest
	// only tests that share the machine use, in its second pass, the
	// cluster's programs first among them: minutes of compiling on a
	// fresh machine, beside image builds that wait more on the network
	// and the disk. A test that needs one not yet built waits for it
	// holding the machine.
	for _, f := range []struct {
		name  string
		build func(t testing.TB)
	}{
		{"image", func(t testing.TB) { ensureImage(t, image.Variant{}, "") }},
		{"foreign", func(t testing.TB) { foreign(t) }},
		{"kube", func(t testing.TB) { BuildKube(t) }},
		{"foreign-vm", func(t testing.TB) { foreignVM(t) }},
		{"foreign-uefi", func(t testing.TB) { foreignUEFI(t) }},
		{"image-rt", func(t testing.TB) { ensureImage(t, image.Variant{KernelFlavour: guest.KernelRT}, "") }},
	} {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			f.build(t)
		})
	}
}
