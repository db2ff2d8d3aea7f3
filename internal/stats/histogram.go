package stats

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
)

// histScale is the number of buckets per octave (power of two). Bucket i
// covers [2^(i/64), 2^((i+1)/64)), so a bucket is 1.09% wide and a value
// reported from it (the bucket's geometric middle, clamped to [Min, Max]) is
// within 0.55% of every observation the bucket holds.
const histScale = 64

// HistogramRelError bounds the relative error of Quantile: the width of one
// bucket, 2^(1/64) - 1.
var HistogramRelError = math.Exp2(1.0/histScale) - 1

// ErrHistogram is wrapped by the errors of Merge and UnmarshalJSON.
var ErrHistogram = errors.New("histogram")

// Histogram is a mergeable distribution of observations in one unit (a
// latency in "us", say), kept as counts in logarithmic buckets so that a
// few hundred thousand observations take a few hundred numbers.
//
// Count, Min, Max, Mean and StdDev are exact (kept beside the buckets);
// Quantile and CDF are within HistogramRelError. Zero and negative values
// share one bucket reported as 0.
//
// Percentiles of several executions must come from the Merge of their
// histograms, never from averaging the executions' percentiles: the mean of
// two p99s is not the p99 of anything, and it hides a bad execution behind
// a good one.
//
// A Histogram is not safe for concurrent use.
type Histogram struct {
	unit    string
	buckets map[int32]uint64 // bucket index -> observations; only non-empty ones
	zero    uint64           // observations <= 0
	count   uint64
	invalid uint64 // NaN, ±Inf and values whose square overflows, never part of count
	min     float64
	max     float64
	sum     float64
	sumSq   float64
}

// CDFPoint says that Fraction of the observations are at most Value.
type CDFPoint struct {
	Value    float64 `json:"value"`
	Fraction float64 `json:"fraction"`
}

// NewHistogram returns an empty histogram of observations in unit.
func NewHistogram(unit string) *Histogram {
	return &Histogram{unit: unit, buckets: map[int32]uint64{}}
}

// Unit is the unit every observation is in.
func (h *Histogram) Unit() string { return h.unit }

// Add records one observation. NaN and ±Inf are not observations of
// anything measurable: they are counted in Invalid and otherwise ignored.
func (h *Histogram) Add(v float64) { h.AddN(v, 1) }

// AddN records n observations of v.
func (h *Histogram) AddN(v float64, n uint64) {
	if n == 0 {
		return
	}
	// An observation beyond about 1e154 would make the sum of squares
	// infinite, which no statistic can use and JSON cannot store: it is
	// as unusable as a NaN. No tool measures anything that large.
	sum, sumSq := h.sum+v*float64(n), h.sumSq+v*v*float64(n)
	if math.IsNaN(v) || math.IsInf(sum, 0) || math.IsInf(sumSq, 0) {
		h.invalid += n
		return
	}
	if h.count == 0 || v < h.min {
		h.min = v
	}
	if h.count == 0 || v > h.max {
		h.max = v
	}
	h.count += n
	h.sum, h.sumSq = sum, sumSq
	if v <= 0 {
		h.zero += n
		return
	}
	if h.buckets == nil {
		h.buckets = map[int32]uint64{}
	}
	h.buckets[bucketOf(v)] += n
}

// bucketOf returns the index of the bucket holding v > 0. The logarithm is
// rounded, so the index is checked against the very edges lowerEdge reports:
// the buckets then partition the values exactly as Quantile and CDF assume.
func bucketOf(v float64) int32 {
	i := int32(math.Floor(math.Log2(v) * histScale))
	if v < lowerEdge(i) {
		i--
	} else if v >= lowerEdge(i+1) {
		i++
	}
	return i
}

func lowerEdge(i int32) float64 { return math.Exp2(float64(i) / histScale) }

// Merge adds every observation of o to h. Histograms of different units
// cannot be merged; h is unchanged then.
func (h *Histogram) Merge(o *Histogram) error {
	if o == nil {
		return nil
	}
	if o.unit != h.unit {
		return fmt.Errorf("%w: cannot merge %q observations into a histogram of %q", ErrHistogram, o.unit, h.unit)
	}
	if math.IsInf(h.sumSq+o.sumSq, 0) || math.IsInf(h.sum+o.sum, 0) {
		return fmt.Errorf("%w: merged sums would overflow", ErrHistogram)
	}
	h.invalid += o.invalid
	if o.count == 0 {
		return nil
	}
	if h.count == 0 || o.min < h.min {
		h.min = o.min
	}
	if h.count == 0 || o.max > h.max {
		h.max = o.max
	}
	// Read o's totals before writing h's: o may be h.
	count, sum, sumSq, zero := o.count, o.sum, o.sumSq, o.zero
	h.count += count
	h.sum += sum
	h.sumSq += sumSq
	h.zero += zero
	if h.buckets == nil {
		h.buckets = map[int32]uint64{}
	}
	if o == h {
		for i, n := range h.buckets {
			h.buckets[i] = 2 * n
		}
		return nil
	}
	for i, n := range o.buckets {
		h.buckets[i] += n
	}
	return nil
}

// Count is the number of valid observations.
func (h *Histogram) Count() uint64 { return h.count }

// Invalid is the number of NaN and infinite values passed to Add.
func (h *Histogram) Invalid() uint64 { return h.invalid }

// Min is the smallest observation, NaN when there is none.
func (h *Histogram) Min() float64 {
	if h.count == 0 {
		return math.NaN()
	}
	return h.min
}

// Max is the largest observation, NaN when there is none.
func (h *Histogram) Max() float64 {
	if h.count == 0 {
		return math.NaN()
	}
	return h.max
}

// Mean is the arithmetic mean, NaN when there is no observation.
func (h *Histogram) Mean() float64 {
	if h.count == 0 {
		return math.NaN()
	}
	return h.sum / float64(h.count)
}

// StdDev is the sample standard deviation (n-1, as in Summary): NaN with no
// observation, 0 with one.
func (h *Histogram) StdDev() float64 {
	switch h.count {
	case 0:
		return math.NaN()
	case 1:
		return 0
	}
	n := float64(h.count)
	// Rounding can drive a tiny variance below zero.
	v := (h.sumSq - h.sum*h.sum/n) / (n - 1)
	if v < 0 {
		return 0
	}
	return math.Sqrt(v)
}

// Quantile returns the smallest observation x such that a fraction q of the
// observations are at most x (the nearest-rank definition), within
// HistogramRelError, clamped to [Min, Max]. Quantile(0) is Min and
// Quantile(1) is Max exactly; q outside [0, 1] is taken as the nearer end.
// It is NaN for an empty histogram or a NaN q.
func (h *Histogram) Quantile(q float64) float64 {
	if h.count == 0 || math.IsNaN(q) {
		return math.NaN()
	}
	if q <= 0 {
		return h.min
	}
	if q >= 1 {
		return h.max
	}
	rank := uint64(math.Ceil(q * float64(h.count)))
	if rank < 1 {
		rank = 1
	}
	cum := h.zero
	if cum >= rank {
		return h.clamp(0)
	}
	for _, i := range h.indices() {
		cum += h.buckets[i]
		if cum >= rank {
			return h.clamp(math.Exp2((float64(i) + 0.5) / histScale))
		}
	}
	return h.max // unreachable while the counts agree
}

func (h *Histogram) clamp(v float64) float64 { return math.Min(math.Max(v, h.min), h.max) }

// CDF returns one point per non-empty bucket, in increasing order: the
// bucket's upper edge (0 for the bucket of zero and negative values; Max
// for the last bucket, whose edge lies beyond every observation) and the
// fraction of observations at most that value. It is nil when empty.
func (h *Histogram) CDF() []CDFPoint {
	if h.count == 0 {
		return nil
	}
	total := float64(h.count)
	var pts []CDFPoint
	var cum uint64
	if h.zero > 0 {
		cum = h.zero
		pts = append(pts, CDFPoint{Value: math.Min(0, h.max), Fraction: float64(cum) / total})
	}
	for _, i := range h.indices() {
		cum += h.buckets[i]
		pts = append(pts, CDFPoint{Value: math.Min(lowerEdge(i+1), h.max), Fraction: float64(cum) / total})
	}
	return pts
}

func (h *Histogram) indices() []int32 {
	idx := make([]int32, 0, len(h.buckets))
	for i := range h.buckets {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
	return idx
}

// histJSON is the stored form. Buckets are [index, count] pairs in
// increasing index order, so equal histograms encode to equal bytes. Zero
// and Invalid are left out when 0.
type histJSON struct {
	Unit    string  `json:"unit"`
	Scale   int     `json:"scale"`
	Count   uint64  `json:"count"`
	Min     float64 `json:"min"`
	Max     float64 `json:"max"`
	Sum     float64 `json:"sum"`
	SumSq   float64 `json:"sumsq"`
	Zero    uint64  `json:"zero,omitempty"`
	Invalid uint64  `json:"invalid,omitempty"`
}

// MarshalJSON writes the compact, stable form
// {"unit":"us","scale":64,"count":…,"min":…,"max":…,"sum":…,"sumsq":…,"buckets":[[index,count],…]}
// with "zero" and "invalid" counts added when not 0. An empty histogram has
// min and max 0.
func (h *Histogram) MarshalJSON() ([]byte, error) {
	head, err := json.Marshal(histJSON{
		Unit: h.unit, Scale: histScale, Count: h.count,
		Min: h.min, Max: h.max, Sum: h.sum, SumSq: h.sumSq,
		Zero: h.zero, Invalid: h.invalid,
	})
	if err != nil {
		return nil, err
	}
	// Bucket indices are signed and counts unsigned; writing the pairs by
	// hand keeps both exact and the output free of spaces.
	var b bytes.Buffer
	b.Write(head[:len(head)-1])
	b.WriteString(`,"buckets":[`)
	for n, i := range h.indices() {
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('[')
		b.WriteString(strconv.FormatInt(int64(i), 10))
		b.WriteByte(',')
		b.WriteString(strconv.FormatUint(h.buckets[i], 10))
		b.WriteByte(']')
	}
	b.WriteString("]}")
	return b.Bytes(), nil
}

// UnmarshalJSON reads what MarshalJSON wrote and checks that it is
// consistent, so a damaged stored histogram is an error, not a wrong
// percentile.
func (h *Histogram) UnmarshalJSON(data []byte) error {
	var in struct {
		histJSON
		Buckets *[][2]int64 `json:"buckets"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return fmt.Errorf("%w: decode: %w", ErrHistogram, err)
	}
	if in.Scale != histScale {
		return fmt.Errorf("%w: scale %d: only %d buckets per octave are supported", ErrHistogram, in.Scale, histScale)
	}
	if in.Buckets == nil {
		return fmt.Errorf("%w: no buckets field", ErrHistogram)
	}
	out := Histogram{
		unit: in.Unit, buckets: make(map[int32]uint64, len(*in.Buckets)),
		zero: in.Zero, count: in.Count, invalid: in.Invalid,
		min: in.Min, max: in.Max, sum: in.Sum, sumSq: in.SumSq,
	}
	total := in.Zero
	for _, pair := range *in.Buckets {
		i, n := pair[0], pair[1]
		if i < math.MinInt32 || i > math.MaxInt32 || n <= 0 {
			return fmt.Errorf("%w: bucket [%d,%d]: want an index in int32 and a positive count", ErrHistogram, i, n)
		}
		if _, dup := out.buckets[int32(i)]; dup {
			return fmt.Errorf("%w: bucket %d appears twice", ErrHistogram, i)
		}
		out.buckets[int32(i)] = uint64(n)
		total += uint64(n)
	}
	if total != in.Count {
		return fmt.Errorf("%w: buckets hold %d observations but count is %d", ErrHistogram, total, in.Count)
	}
	if in.Count > 0 && in.Min > in.Max {
		return fmt.Errorf("%w: min %v is above max %v", ErrHistogram, in.Min, in.Max)
	}
	*h = out
	return nil
}
