package stats

import (
	"math"
	"math/rand/v2"
	"slices"
)

// ChangePointOptions tune ChangePoints.
type ChangePointOptions struct {
	// Alpha is the significance level each change point must reach.
	Alpha float64 `json:"alpha"`
	// Permutations of the test of each candidate.
	Permutations int `json:"permutations"`
	// MinSize is the fewest values a segment may hold (at least 2: the
	// statistic needs a distance within each side). It is also how many
	// values must follow a change before it can be found.
	MinSize int `json:"min_size"`
	// Seed of the permutations, so the same series always gives the same
	// answer.
	Seed uint64 `json:"seed"`
}

// DefaultChangePointOptions: a change must be significant at 5% against
// 999 permutations, and each segment hold at least 3 values.
var DefaultChangePointOptions = ChangePointOptions{Alpha: 0.05, Permutations: 999, MinSize: 3, Seed: 1}

// ChangePoint is where a series' distribution changed.
type ChangePoint struct {
	// Index is the first value of the new segment.
	Index int `json:"index"`
	// Q is the divergence statistic of the split, P its permutation p-value.
	Q float64 `json:"q"`
	P float64 `json:"p"`
}

// ChangePoints finds where the distribution of values (finite, in order)
// changes, by E-divisive means (Matteson and James, "A nonparametric
// approach for multiple change point analysis of multivariate data", JASA
// 2014; with exponent 1, the variant MongoDB's performance CI uses): the
// split of a segment that maximises the energy distance between its two
// sides, weighted by their sizes, is the candidate. Among the current
// segments the strongest candidate is tested Permutations times by
// permuting every segment's values, each within itself: its p-value is the
// share of permutations whose best split over all segments is at least as
// strong (counting the observed one). A
// candidate below Alpha splits its segment and the search goes on; the
// first one that is not significant ends it. It makes no assumption of
// normality and finds changes of any size, in location or spread; with
// few values it finds only large ones. The result is in index order.
func ChangePoints(values []float64, o ChangePointOptions) []ChangePoint {
	minSize := max(o.MinSize, 2)
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	type segment struct{ start, end, tau int }
	var found []ChangePoint
	segments := [][2]int{{0, len(values)}}
	for {
		best, bestQ := segment{}, math.Inf(-1)
		for _, s := range segments {
			if tau, q := bestSplit(values[s[0]:s[1]], minSize); tau > 0 && q > bestQ {
				best, bestQ = segment{s[0], s[1], s[0] + tau}, q
			}
		}
		if math.IsInf(bestQ, -1) || !(bestQ > 0) {
			break
		}
		// Under the null of no further change every current segment is
		// exchangeable within itself, and the candidate is the best over
		// all of them: each permutation shuffles every segment and takes
		// its best split over all of them too (as the reference
		// implementation, R's ecp, does). Permuting only the candidate's
		// segment would compare a maximum over many segments with the
		// null of one, and find false change points once a series is cut.
		var perms [][]float64
		for _, s := range segments {
			// A segment too short to split has no best split to shuffle for.
			if s[1]-s[0] >= 2*minSize {
				perms = append(perms, slices.Clone(values[s[0]:s[1]]))
			}
		}
		hits := 0
		// Splits as strong up to rounding count as as strong.
		eps := 1e-9 * (bestQ + 1)
		// Enough permutations as strong decide that p reaches Alpha: the
		// rest cannot lower it, and the last test of every search is one
		// such, so it stops there.
		for r := 0; r < o.Permutations && float64(hits+1) < o.Alpha*float64(o.Permutations+1); r++ {
			permQ := math.Inf(-1)
			for _, perm := range perms {
				rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
				_, q := bestSplit(perm, minSize)
				permQ = max(permQ, q)
			}
			if permQ >= bestQ-eps {
				hits++
			}
		}
		p := float64(hits+1) / float64(o.Permutations+1)
		if p >= o.Alpha {
			break
		}
		found = append(found, ChangePoint{Index: best.tau, Q: bestQ, P: p})
		i := slices.Index(segments, [2]int{best.start, best.end})
		segments = slices.Replace(segments, i, i+1, [2]int{best.start, best.tau}, [2]int{best.tau, best.end})
	}
	slices.SortFunc(found, func(a, b ChangePoint) int { return a.Index - b.Index })
	return found
}

// bestSplit returns the split tau of x (both sides at least minSize
// long) that maximises the E-divisive statistic
//
//	Q = 2/n·Σ|l−r| − τ(n−τ)/n · (mean within-left distance + mean within-right distance)
//
// and that Q; tau 0 when x is too short to split. The sums are updated as
// each value moves from the right side to the left, so a whole scan costs
// O(n²).
func bestSplit(x []float64, minSize int) (tau int, q float64) {
	n := len(x)
	if n < 2*minSize {
		return 0, 0
	}
	// Sums of distances within each side and across them; every value
	// starts on the right.
	left, right, cross := 0.0, 0.0, 0.0
	for i := range x {
		for j := i + 1; j < n; j++ {
			right += math.Abs(x[i] - x[j])
		}
	}
	q = math.Inf(-1)
	for k := 0; k < n-minSize; k++ {
		toLeft, toRight := 0.0, 0.0
		for i := 0; i < k; i++ {
			toLeft += math.Abs(x[i] - x[k])
		}
		for j := k + 1; j < n; j++ {
			toRight += math.Abs(x[k] - x[j])
		}
		left += toLeft
		right -= toRight
		cross += toRight - toLeft
		t := k + 1
		if t < minSize {
			continue
		}
		nl, nr := float64(t), float64(n-t)
		s := 2*cross/float64(n) - nl*nr/float64(n)*(left/(nl*(nl-1)/2)+right/(nr*(nr-1)/2))
		if s > q {
			tau, q = t, s
		}
	}
	return tau, q
}
