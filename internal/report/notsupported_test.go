package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/store"
)

// Steps a guest group could not run are listed apart from the failures,
// once per group, with why.
func TestNotSupportedStepsAreNoFailures(t *testing.T) {
	var buf bytes.Buffer
	writeFailures(&buf, []store.Failure{
		{Guest: "vm-0", Group: "vm", WorkloadID: "timerlat", Repetition: 0, Error: "not supported in this guest: this kernel has no timerlat tracer (CONFIG_TIMERLAT_TRACER)"},
		{Guest: "c-1", Group: "c", WorkloadID: "cpu", Repetition: 1, Error: "exit status 1: boom"},
	})
	out := buf.String()
	for _, want := range []string{"not supported (once per guest group", "  vm: timerlat: this kernel has no timerlat tracer", "1 failure(s):", "  c-1: cpu rep 2: exit status 1: boom"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}
