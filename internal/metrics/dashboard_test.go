package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDashboardUsesOnlyExportedMetrics keeps the Grafana dashboard in the
// docs in step with the metrics: every vfleet_ name its queries use must
// appear in the golden expositions.
func TestDashboardUsesOnlyExportedMetrics(t *testing.T) {
	b, err := os.ReadFile("../../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct{ Definition string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard is not valid JSON: %v", err)
	}
	exported := string(recorded(t, "run.golden")) + string(recorded(t, "store.golden"))
	name := regexp.MustCompile(`vfleet_[a-z_]+`)
	check := func(where, expr string) {
		for _, m := range name.FindAllString(expr, -1) {
			if !strings.Contains(exported, "# TYPE "+m+" ") {
				t.Errorf("%s uses %s, which is not exported", where, m)
			}
		}
	}
	queries := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			check("panel "+p.Title, tg.Expr)
			queries++
		}
	}
	for _, v := range dash.Templating.List {
		check("variable", v.Definition)
	}
	if queries < 10 {
		t.Fatalf("dashboard has %d queries; is it the right file?", queries)
	}
}
