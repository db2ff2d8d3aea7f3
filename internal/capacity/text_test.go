package capacity

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/report"
)

// TestPage: the HTML page plots each SLO's figure at every size measured,
// its bound as a line in the bound's terms and the answer on the curve.
func TestPage(t *testing.T) {
	slos := []SLO{slo(t, "rr.net.rtt_us.p99 <= 510us")}
	m := newSimulated(curve{metric: "rr.net.rtt_us.p99", unit: "us", at: func(n int) float64 { return 100 + 20*float64(n) }, noise: 0.005}, 1)
	res, err := Search(context.Background(), m, Config{SLOs: slos, Max: 100, Confidence: 0.95})
	if err != nil {
		t.Fatal(err)
	}
	page, err := res.Page("capacity of c in s", slos, hostinfo.Fingerprint{Hostname: "lab1"})
	if err != nil {
		t.Fatal(err)
	}
	ch := page.Charts[0]
	if ch.Unit != "us" || math.Abs(ch.Bound-510) > 1e-9 || len(ch.Points) != len(res.Points) || ch.Points[0].X != 1 || ch.Points[0].Y < 115 || ch.Points[0].Y > 125 {
		t.Fatalf("chart in the wrong terms: %+v", ch)
	}
	var b strings.Builder
	if err := report.WriteCapacityHTML(&b, page); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{"largest size that meets every SLO: 20", `<svg class="scaling"`, "bound: 510.0 us", "answer: 20", "fleet size (log scale)", "lab1", "<pre>SIZE"} {
		if !strings.Contains(html, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}
