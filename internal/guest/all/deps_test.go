package all

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/testutil"
	"github.com/vfleet/vfleet/internal/tools"
	// The workloads register the tools their own tests run on this host.
	_ "github.com/vfleet/vfleet/internal/workload"
)

// The hint a missing tool gives, whichever package registers it (here,
// where every kind and workload is compiled in, all of them), names scripts/deps.sh with one of the
// tool's packages: the script must know every such package as part of a
// need, or a user following the hint gets a usage error.
func TestDepsScriptKnowsEveryPackageAHintNames(t *testing.T) {
	script, err := os.ReadFile(filepath.Join(testutil.ModuleRoot(t), "scripts", "deps.sh"))
	if err != nil {
		t.Fatal(err)
	}
	inNeed := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s*(?:\[\w+\]=|need\[\w+\]\+?=)"([^"]*)"`).FindAllStringSubmatch(string(script), -1) {
		for _, p := range strings.Fields(m[1]) {
			inNeed[p] = true
		}
	}
	if len(inNeed) < 20 {
		t.Fatalf("read only %d packages from the needs of scripts/deps.sh: has its layout changed?", len(inNeed))
	}
	for _, name := range tools.Known() {
		s, _ := tools.Lookup(name)
		if s.Package == "" {
			continue
		}
		for _, p := range strings.Split(s.Package, " and ") {
			// The other architecture's cross compiler is in the need
			// of the host the script runs on.
			if !inNeed[p] && !strings.Contains(p, "-cross") && !strings.Contains(p, "-linux-gnu") {
				t.Errorf("%s: its package %s is in no need of scripts/deps.sh", name, p)
			}
		}
	}
}
