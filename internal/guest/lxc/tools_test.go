package lxc

import (
	"testing"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/testutil"
	"github.com/vfleet/vfleet/internal/tools"
)

// The kind's program is a tool it registers, read from the version LXC's
// tools print alone on a line, and no other tool's banner.
func TestProgramIsARegisteredTool(t *testing.T) {
	testutil.ToolBanners(t, map[string]string{kind{}.Program(guest.Spec{}): "5.0.2"})
	if v, err := tools.ParseVersion("lxc-start", []byte("runc version 1.1.5+ds1\n")); err == nil {
		t.Errorf("lxc-start accepted runc's banner as version %q", v)
	}
}
