package qemu

import (
	"testing"

	"github.com/vfleet/vfleet/internal/testutil"
)

// The package's tests share what testutil starts for a test process (the
// system libvirt's daemons).
func TestMain(m *testing.M) { testutil.Main(m) }
