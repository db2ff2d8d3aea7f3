package testutil

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vfleet/vfleet/internal/tools"
)

// ToolBanners checks that each tool of want, as the package under test
// registers it with internal/tools, reads the version want gives from
// its banner recorded in the package's testdata/TOOL.version, so that a
// tool's pattern is tested beside the package that registers it.
func ToolBanners(t *testing.T, want map[string]string) {
	t.Helper()
	for name, version := range want {
		banner, err := os.ReadFile(filepath.Join("testdata", name+".version"))
		if err != nil {
			t.Errorf("every tool a package registers needs its banner under its testdata: %v", err)
			continue
		}
		got, err := tools.ParseVersion(name, banner)
		if err != nil || got != version {
			t.Errorf("%s: got %q, %v; want %q", name, got, err, version)
		}
	}
}
