package report

import (
	"math"
	"sort"
	"strconv"

	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/workload"
)

// ScalingCurve is how a workload's headline metric moves with one numeric
// parameter: the run has several entries of the workload that differ in
// that parameter alone (iperf3 with 1 and 4 streams, fio at iodepth 1, 4
// and 16). Only the headline metric, the first the workload reports, is
// drawn: one plot per metric of every family would bury the page.
type ScalingCurve struct {
	Workload string          `json:"workload"`
	Metric   string          `json:"metric"`
	Unit     string          `json:"unit"`
	Better   workload.Better `json:"better"`
	// Param is the parameter on the x axis; Fixed the parameters the
	// entries share.
	Param string          `json:"param"`
	Fixed workload.Params `json:"fixed"`
	// LogX is set when x spans more than a factor 10, so that 64 and 16384
	// are not drawn as one point and a far one.
	LogX   bool     `json:"log_x"`
	Series []Series `json:"series"`
}

// Series is one line of a plot: a guest group's points, in x order.
type Series struct {
	Label  string  `json:"label"`
	Points []Point `json:"points"`
}

// Point is a mean at x with its 95% confidence interval [Low, High]; N is
// how many values the mean is of, Source what was measured there (the
// workload entry of a scaling curve).
type Point struct {
	X      float64 `json:"x"`
	Y      float64 `json:"y"`
	Low    float64 `json:"low"`
	High   float64 `json:"high"`
	N      int     `json:"n"`
	Source string  `json:"source,omitempty"`
}

// MarshalJSON writes a figure that is not a finite number as null, with
// what it was (stats.MarshalFinite).
func (p Point) MarshalJSON() ([]byte, error) {
	type plain Point
	return stats.MarshalFinite(plain(p))
}

// wideRange says whether positive xs span more than a factor 10, which a
// linear axis would squeeze into one end.
func wideRange(xs []float64) bool {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		if x <= 0 {
			return false
		}
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return hi > 10*lo
}

// entryInfo is what scaling detection needs of one workload entry.
type entryInfo struct {
	id, adapter string
	headline    Row
	params      workload.Params
}

// entryParams are the parameters an entry ran with: those every sample of
// it carries with one value. Parameters set per guest (the data path of a
// network workload) vary between groups and are left out: they are not
// what the scenario's entries differ in. A parameter the scenario left out
// takes the adapter's default, so "streams: 4" against an entry without
// streams reads as 4 against 1.
func entryParams(samples []store.Sample) (map[string]workload.Params, map[string]string) {
	type state struct {
		values map[string]string
		mixed  map[string]bool
		n      int
		counts map[string]int
	}
	states := map[string]*state{}
	adapters := map[string]string{}
	for _, s := range samples {
		entry := entryOf(s)
		st := states[entry]
		if st == nil {
			st = &state{values: map[string]string{}, mixed: map[string]bool{}, counts: map[string]int{}}
			states[entry] = st
			adapters[entry] = s.Workload
		}
		st.n++
		for k, v := range s.Params {
			st.counts[k]++
			if old, ok := st.values[k]; ok && old != v {
				st.mixed[k] = true
			}
			st.values[k] = v
		}
	}
	out := map[string]workload.Params{}
	for id, st := range states {
		p := workload.Params{}
		for k, v := range st.values {
			if !st.mixed[k] && st.counts[k] == st.n {
				p[k] = v
			}
		}
		if w, err := workload.Lookup(adapters[id]); err == nil {
			for k, v := range w.Defaults() {
				if _, seen := st.values[k]; !seen {
					p[k] = v
				}
			}
		}
		out[id] = p
	}
	return out, adapters
}

// buildScaling finds the families of entries of one workload whose
// parameters differ in exactly one numeric parameter and makes a curve of
// each: x that parameter, one series per group, y the group's mean of the
// headline metric with its interval. Curves come in the order of their
// first entry, then by parameter name.
func buildScaling(c Comparison, samples []store.Sample) []ScalingCurve {
	params, adapters := entryParams(samples)
	var entries []entryInfo
	seen := map[string]bool{}
	rowOf := map[[2]string]Row{}
	for _, r := range c.Rows {
		id := r.Entry()
		rowOf[[2]string{id, r.Metric}] = r
		if !seen[id] {
			seen[id] = true
			entries = append(entries, entryInfo{id: id, adapter: adapters[id], headline: r, params: params[id]})
		}
	}
	// Entries are comparable only when they run the same tool and lead
	// with the same metric (fio's randread and randwrite do not).
	type bucketKey struct{ adapter, metric, unit string }
	var buckets []bucketKey
	byBucket := map[bucketKey][]entryInfo{}
	for _, e := range entries {
		k := bucketKey{e.adapter, e.headline.Metric, e.headline.Unit}
		if byBucket[k] == nil {
			buckets = append(buckets, k)
		}
		byBucket[k] = append(byBucket[k], e)
	}
	type found struct {
		first int // index of the family's first entry in the run
		curve ScalingCurve
	}
	var all []found
	index := map[string]int{}
	for i, e := range entries {
		index[e.id] = i
	}
	for _, bk := range buckets {
		family := byBucket[bk]
		if len(family) < 2 {
			continue
		}
		keys := map[string]bool{}
		for _, e := range family {
			for k := range e.params {
				keys[k] = true
			}
		}
		for _, k := range sortedStrings(keys) {
			var sigs []string
			groups := map[string][]entryInfo{}
			for _, e := range family {
				if _, ok := numericParam(e.params, k); !ok {
					continue
				}
				rest := workload.Params{}
				for pk, pv := range e.params {
					if pk != k {
						rest[pk] = pv
					}
				}
				sig := paramString(rest)
				if groups[sig] == nil {
					sigs = append(sigs, sig)
				}
				groups[sig] = append(groups[sig], e)
			}
			for _, sig := range sigs {
				if curve, ok := scalingCurve(c, rowOf, groups[sig], k); ok {
					all = append(all, found{first: index[groups[sig][0].id], curve: curve})
				}
				if k != fleetSizeParam {
					continue
				}
				// Over fleet size, the fleet's aggregate beside the per-guest
				// score: where the sum stops growing is the host's capacity.
				if total, ok := totalFamily(rowOf, groups[sig]); ok {
					if curve, ok := scalingCurve(c, rowOf, total, k); ok {
						all = append(all, found{first: index[groups[sig][0].id], curve: curve})
					}
				}
			}
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].first < all[j].first })
	out := make([]ScalingCurve, len(all))
	for i, f := range all {
		out[i] = f.curve
	}
	return out
}

// fleetSizeParam is the case parameter of a fleet sweep.
const fleetSizeParam = "fleet_size"

// totalFamily is the family with each entry's headline swapped for its
// fleet total; ok is false unless every entry has one.
func totalFamily(rowOf map[[2]string]Row, family []entryInfo) ([]entryInfo, bool) {
	out := make([]entryInfo, len(family))
	for i, e := range family {
		r, ok := rowOf[[2]string{e.id, workload.TotalPrefix + e.headline.Metric}]
		if !ok {
			return nil, false
		}
		e.headline = r
		out[i] = e
	}
	return out, true
}

// numericParam reads a parameter as a finite number.
func numericParam(p workload.Params, k string) (float64, bool) {
	v, ok := p[k]
	if !ok {
		return 0, false
	}
	x, err := strconv.ParseFloat(v, 64)
	if err != nil || !finite(x) {
		return 0, false
	}
	return x, true
}

// scalingCurve draws one family; ok is false when it has fewer than two
// entries, two entries at one x (nothing tells them apart on the plot), or
// no group measured at two of its points.
func scalingCurve(c Comparison, rowOf map[[2]string]Row, family []entryInfo, param string) (ScalingCurve, bool) {
	if len(family) < 2 {
		return ScalingCurve{}, false
	}
	x := func(e entryInfo) float64 {
		v, _ := numericParam(e.params, param)
		return v
	}
	sort.SliceStable(family, func(i, j int) bool { return x(family[i]) < x(family[j]) })
	xs := make([]float64, len(family))
	for i, e := range family {
		xs[i] = x(e)
	}
	for i := 1; i < len(xs); i++ {
		if xs[i] == xs[i-1] {
			return ScalingCurve{}, false
		}
	}
	head := family[0].headline
	curve := ScalingCurve{Workload: family[0].adapter, Metric: head.Metric, Unit: head.Unit, Better: head.Better, Param: param,
		Fixed: workload.Params{}, LogX: wideRange(xs)}
	for k, v := range family[0].params {
		if k != param {
			curve.Fixed[k] = v
		}
	}
	drawable := false
	for j, col := range c.Columns {
		s := Series{Label: col.Label()}
		for i, e := range family {
			cell := rowOf[[2]string{e.id, head.Metric}].Cells
			if j >= len(cell) || !cell[j].Present {
				continue
			}
			sum := cell[j].Summary
			s.Points = append(s.Points, Point{X: xs[i], Y: sum.Mean, Low: sum.CILow, High: sum.CIHigh, N: sum.N, Source: e.id})
		}
		if len(s.Points) == 0 {
			continue
		}
		drawable = drawable || len(s.Points) >= 2
		curve.Series = append(curve.Series, s)
	}
	return curve, drawable
}
