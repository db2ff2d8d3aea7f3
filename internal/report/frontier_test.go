package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/audit"
	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/store"
)

// spectrum is a run of five technologies: the bare host, two containers
// of one isolation (crun the dearer), gVisor and a VM (the VM cheaper and
// more isolated than gVisor), a group the audit missed and one without an
// index.
func spectrum() Comparison {
	run := store.Run{ID: 9, ScenarioName: "isolation-spectrum", Baseline: "host", Status: store.StatusComplete,
		Dropped: []store.DroppedGroup{{Name: "vm-kvm", Kind: "vm", Runtime: "q35", Reason: "not supported on this host: accel kvm: no"}}}
	c := Build(run, nil, nil)
	c.Columns = []Column{{Group: "host", Kind: "host", Baseline: true}, {Group: "runc", Kind: "container", Runtime: "runc"},
		{Group: "crun", Kind: "container", Runtime: "crun"}, {Group: "gvisor", Kind: "container", Runtime: "runsc"},
		{Group: "microvm", Kind: "vm", Runtime: "microvm"}, {Group: "unaudited", Kind: "container"}, {Group: "unmeasured", Kind: "container"}}
	est := func(v, lo, hi float64) stats.Estimate { return stats.Estimate{Value: v, Low: lo, High: hi} }
	nan := math.NaN()
	c.Index = []stats.Estimate{est(1, 1, 1), est(0.95, 0.9, 1), est(0.93, 0.9, 0.96), est(0.5, 0.45, 0.55), est(0.6, 0.5, 0.7), est(0.99, 0.98, 1), est(nan, nan, nan)}
	c.Audit = &audit.Report{Groups: []audit.Group{
		{Group: "host", Kind: "host", Weaker: 6}, {Group: "runc", Kind: "container"}, {Group: "crun", Kind: "container"},
		{Group: "gvisor", Kind: "container", Stronger: 3}, {Group: "microvm", Kind: "vm", Stronger: 5, Weaker: 1},
		{Group: "unmeasured", Kind: "container", Stronger: 9},
	}}
	return c
}

func TestFrontierIsTheGroupsNoOtherBeatsOnBoth(t *testing.T) {
	pts := frontierOf(spectrum())
	var got []string
	for _, p := range pts {
		got = append(got, p.Label+" "+yesNo(p.OnFrontier))
	}
	want := []string{"host yes", "runc [container] (runc) yes", "crun [container] (crun) no", "gvisor [container] (runsc) no", "microvm [vm] (microvm) yes"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("frontier:\n got %q\nwant %q", got, want)
	}
	if pts[4].Score != 4 || pts[0].Score != -6 {
		t.Fatalf("scores %d and %d, want stronger less weaker: 4 and -6", pts[4].Score, pts[0].Score)
	}
}

// Two technologies alike on both count as equals: neither beats the other.
func TestFrontierKeepsEqualPoints(t *testing.T) {
	a := frontierPoint{Index: stats.Estimate{Value: 0.9}, Score: 1}
	if dominates(a, a) {
		t.Fatal("a point beats its equal")
	}
	if b := (frontierPoint{Index: stats.Estimate{Value: 0.9}, Score: 2}); !dominates(b, a) || dominates(a, b) {
		t.Fatal("as cheap and stronger must beat, and not the other way round")
	}
}

func TestNoFrontierWithoutTwoGroupsOfBoth(t *testing.T) {
	c := spectrum()
	c.Audit = nil
	if pts := frontierOf(c); pts != nil {
		t.Fatalf("without an audit: %+v", pts)
	}
	c = spectrum()
	c.Audit.Groups = c.Audit.Groups[:1]
	if pts := frontierOf(c); pts != nil {
		t.Fatalf("one group audited: %+v", pts)
	}
	var page bytes.Buffer
	if err := WriteHTML(&page, c, nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(page.String(), "Cost and isolation") {
		t.Fatal("the page shows a frontier of one point")
	}
}

func TestFrontierSVG(t *testing.T) {
	var page bytes.Buffer
	if err := WriteHTML(&page, spectrum(), nil); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	start := strings.Index(html, `<svg class="frontier"`)
	if start < 0 {
		t.Fatal("no frontier plot on the page")
	}
	svg := html[start : start+strings.Index(html[start:], "</svg>")]
	if n, m := strings.Count(svg, `<circle class="frontier"`), strings.Count(svg, `<circle class="dominated"`); n != 3 || m != 2 {
		t.Errorf("%d frontier and %d dominated points, want 3 and 2", n, m)
	}
	for _, label := range []string{">host</text>", ">runc [container] (runc)</text>", ">crun [container] (crun)</text>", ">gvisor [container] (runsc)</text>", ">microvm [vm] (microvm)</text>"} {
		if !strings.Contains(svg, label) {
			t.Errorf("plot lacks the label %s", label)
		}
	}
	// The line runs through the frontier's three points, left to right
	// and down: more isolation costs more.
	m := regexp.MustCompile(`<polyline class="frontier" points="([^"]*)"`).FindStringSubmatch(svg)
	if m == nil {
		t.Fatalf("no frontier line:\n%s", svg)
	}
	var xs, ys []float64
	for _, pt := range strings.Fields(m[1]) {
		var x, y float64
		if _, err := fmtSscanf(pt, &x, &y); err != nil {
			t.Fatal(err)
		}
		xs, ys = append(xs, x), append(ys, y)
	}
	if len(xs) != 3 || !(xs[0] < xs[1] && xs[1] < xs[2]) || !(ys[0] < ys[1] && ys[1] < ys[2]) {
		t.Errorf("frontier line %q: want 3 points, rightwards and downwards", m[1])
	}
	// Every point has its index's interval as an error bar but the
	// baseline, whose interval is its own 1.00.
	if n := strings.Count(svg, `class="errbar frontier-bar"`); n != 4 {
		t.Errorf("%d error bars, want 4", n)
	}
	for _, want := range []string{"<th>technology</th>", "<td>gvisor [container] (runsc)</td><td>0.50 [0.45, 0.55]</td><td>&#43;3 (3 stronger, 0 weaker)</td><td>no</td>",
		"<h2>Not run here</h2>", "<td>vm-kvm</td><td>vm q35</td><td>not supported on this host: accel kvm: no</td>"} {
		if !strings.Contains(html, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

func TestFrontierAndDroppedGroupsInTheTable(t *testing.T) {
	var out bytes.Buffer
	if err := WriteTable(&out, spectrum(), TableOptions{}); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"cost and isolation: ",
		"technology                  overhead index ↑   audit score →              on frontier",
		"microvm [vm] (microvm)      0.60 [0.50, 0.70]  +4 (5 stronger, 1 weaker)  yes",
		"crun [container] (crun)     0.93 [0.90, 0.96]  0 (0 stronger, 0 weaker)   no",
		"not run here (optional groups this host refused):\n  vm-kvm (vm q35): not supported on this host: accel kvm: no\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("table lacks %q:\n%s", want, text)
		}
	}
}

func fmtSscanf(pt string, x, y *float64) (int, error) { return fmt.Sscanf(pt, "%f,%f", x, y) }

func TestDroppedGroupsInTheJSON(t *testing.T) {
	var out bytes.Buffer
	if err := WriteJSON(&out, spectrum(), nil); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Run struct {
			Dropped []store.DroppedGroup `json:"dropped"`
		} `json:"run"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Run.Dropped, spectrum().Run.Dropped) {
		t.Fatalf("dropped groups in the JSON: %+v", got.Run.Dropped)
	}
}

// Two VM groups audit alike (a direct VM and a libvirt-managed one): the
// chart's score axis is then two wide and still has its ticks.
func TestFrontierChartOfGroupsOfOneScore(t *testing.T) {
	ch := buildFrontierChart([]frontierPoint{{Label: "direct", Index: stats.Estimate{Value: 1}, Score: 3}, {Label: "libvirt", Index: stats.Estimate{Value: 0.94}, Score: 3}})
	if ch == nil || len(ch.XTicks) != 3 {
		t.Fatalf("chart = %+v", ch)
	}
}

// An escape that reached the host takes a point off the group's audit
// score, and says so.
func TestEscapesLowerTheScore(t *testing.T) {
	c := spectrum()
	for i, g := range c.Audit.Groups {
		if g.Group == "runc" {
			c.Audit.Groups[i].Escaped = 1
		}
	}
	for _, p := range frontierOf(c) {
		if p.Label != "runc [container] (runc)" {
			continue
		}
		if p.Score != -1 || !strings.Contains(p.scoreText(), "1 escaped") {
			t.Errorf("runc with an escape: score %d (%s), want -1 with the escape named", p.Score, p.scoreText())
		}
	}
}

// Many groups of one score with indices a label's height apart (a run's
// six microVMs) are each labelled below the other: a label moved to just
// below another, by a gap that rounding made a hair short, once moved it
// back and forth for ever.
func TestFrontierLabelsOfOneScoreAreStacked(t *testing.T) {
	est := func(v, lo, hi float64) stats.Estimate { return stats.Estimate{Value: v, Low: lo, High: hi} }
	pts := []frontierPoint{{Label: "host", Index: est(1, 1, 1), Score: -9},
		{Label: "a", Index: est(0.35379710929628955, 0.1389745259601137, 0.9006858896020677), Score: 3},
		{Label: "b", Index: est(0.4141585483175693, 0.17992311468310376, 0.9533366707586471), Score: 3},
		{Label: "c", Index: est(0.4325522963604314, 0.1583930267623975, 1.1812482715375472), Score: 3},
		{Label: "d", Index: est(0.3179823267365265, 0.12576134858267957, 0.804005056055043), Score: 3},
		{Label: "e", Index: est(0.33501991490310173, 0.1052036614239139, 1.0668672730830315), Score: 3},
		{Label: "f", Index: est(0.34211895478531795, 0.08566433435265214, 1.3663256722635673), Score: 3}}
	done := make(chan *frontierChart, 1)
	go func() { done <- buildFrontierChart(pts) }()
	select {
	case ch := <-done:
		for i, a := range ch.Points {
			for _, b := range ch.Points[:i] {
				if math.Abs(a.TextX-b.TextX) < 80 && math.Abs(a.TextY-b.TextY) < frontierLabelGap-1e-6 {
					t.Errorf("labels %s and %s overlap: %v and %v", a.Label, b.Label, a.TextY, b.TextY)
				}
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("placing the labels did not end")
	}
}
