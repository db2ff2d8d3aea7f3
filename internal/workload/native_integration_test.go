package workload

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/image/native"
	"github.com/vfleet/vfleet/internal/testutil"
	"github.com/vfleet/vfleet/internal/tools"
	"github.com/vfleet/vfleet/internal/workload/programs"
)

// The cache sweep and the timed encoding run here as the image builds
// their programs, through the commands the adapters build (with short
// parameters), and the parsers read what they print: LAME, Debian's, run
// by vfleet-encode over the input it generates.
func TestCachebenchAndLameOnTheHost(t *testing.T) {
	if _, err := native.Compiler(runtime.GOARCH); errors.Is(err, tools.ErrMissing) {
		t.Skipf("no C compiler here: %v", err)
	}
	if _, err := tools.Find(programs.Lame.Name); err != nil {
		t.Skip(err)
	}
	root := t.TempDir()
	if err := native.Build(context.Background(), runtime.GOARCH, root); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", filepath.Join(root, native.BinDir)+string(os.PathListSeparator)+os.Getenv("PATH"))
	for _, tc := range []struct {
		workload string
		params   Params
		metrics  []string
	}{
		{"cachebench", Params{"min_kib": "4", "max_kib": "64"}, []string{"read_mbps", "write_mbps", "rmw_mbps"}},
		{"lame", Params{"audio_seconds": "2"}, []string{"encode_s", "encode_cpu_s"}},
	} {
		w := mustLookup(t, tc.workload)
		ex, err := w.Command(merge(w.Defaults(), tc.params), 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		ex.WorkDir = t.TempDir()
		stdout, stderr, err := runOnHost(t, ex)
		if err != nil {
			t.Fatalf("%s: %v: %s%s", tc.workload, err, stdout, stderr)
		}
		samples, err := w.Parse(stdout, stderr)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range tc.metrics {
			if v := find(samples, m); v <= 0 {
				t.Errorf("%s %s = %v", tc.workload, m, v)
			}
		}
		if left, _ := os.ReadDir(ex.WorkDir); len(left) > 0 {
			t.Errorf("%s left %s in its working directory", tc.workload, left[0].Name())
		}
	}
}

// lame is a tool the workloads register, read from LAME's banner.
func TestLameIsARegisteredTool(t *testing.T) {
	testutil.ToolBanners(t, map[string]string{programs.Lame.Name: "3.100"})
}
