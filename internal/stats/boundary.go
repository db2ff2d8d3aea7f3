package stats

import (
	"math"
	"sync"

	"gonum.org/v1/gonum/stat/distuv"
)

// spent is the share of alpha a test has spent at information fraction t
// (the information at a look over that at the last): α·t², the power
// family of Kim & DeMets (1987) with ρ = 2. Between Pocock's even
// spending (ρ = 1), which gives early looks the most and the last one
// the least, and O'Brien-Fleming's (ρ ≈ 3), which spends almost nothing
// early: a large change is still decided within a few repetitions, and
// the last look keeps most of alpha (TestSequentialDecisionsSimulated
// compared them).
func spent(alpha, t float64) float64 {
	return alpha * math.Pow(min(max(t, 0), 1), 2)
}

// upperTail is 1 − Φ(x), exact far into the tail where 1 − CDF is 0.
func upperTail(x float64) float64 { return 0.5 * math.Erfc(x/math.Sqrt2) }

// maxBoundary caps a look's critical value: beyond it the chance of
// crossing under the null (2e-15) is nothing the spending could resolve.
const maxBoundary = 8.0

// groupSequential returns, for looks at increasing information levels
// info (the inverse variance of the estimate at each look), the two-sided
// nominal level each look's test must reach so that the chance of a
// crossing at any look, under the null, is alpha spent as spent over
// info[k]/info[last]. The boundaries are exact for a normal statistic
// with independent increments, found by the recursive numerical
// integration of Armitage, McPherson & Rowe (1969) as Jennison & Turnbull
// (2000, ch. 19) set it out: the density of the score S = Z·√I on the
// region no earlier look crossed, carried from look to look.
func groupSequential(alpha float64, info []float64) []float64 {
	levels := make([]float64, len(info))
	last := info[len(info)-1]
	var grid, dens, wts []float64
	done := 0.0
	for k, ik := range info {
		target := spent(alpha, ik/last) - done
		done += target
		var c float64
		switch {
		case target <= 0:
			c = maxBoundary
		case k == 0:
			c = math.Min(maxBoundary, distuv.UnitNormal.Quantile(1-target/2))
		default:
			sd := math.Sqrt(ik - info[k-1])
			cross := func(c float64) float64 {
				b := c * math.Sqrt(ik)
				p := 0.0
				for i, u := range grid {
					p += wts[i] * dens[i] * (upperTail((b-u)/sd) + upperTail((b+u)/sd))
				}
				return p
			}
			lo, hi := 0.0, maxBoundary
			if cross(hi) >= target {
				c = hi
				break
			}
			for range 60 {
				mid := (lo + hi) / 2
				if cross(mid) > target {
					lo = mid
				} else {
					hi = mid
				}
			}
			c = hi
		}
		levels[k] = 2 * upperTail(c)
		if k+1 == len(info) {
			break
		}
		// The density at this look on the region it did not cross.
		b := c * math.Sqrt(ik)
		next, nw := simpson(-b, b, gridPoints(b, info, k))
		nd := make([]float64, len(next))
		if k == 0 {
			for j, s := range next {
				nd[j] = normalDensity(s, math.Sqrt(ik))
			}
		} else {
			sd := math.Sqrt(ik - info[k-1])
			for j, s := range next {
				v := 0.0
				for i, u := range grid {
					v += wts[i] * dens[i] * normalDensity(s-u, sd)
				}
				nd[j] = v
			}
		}
		grid, dens, wts = next, nd, nw
	}
	return levels
}

// gridPoints is an odd number of points over [−b, b] fine enough for the
// next increment's spread, within bounds that keep a plan of many looks
// quick.
func gridPoints(b float64, info []float64, k int) int {
	sd := math.Sqrt(info[k+1] - info[k])
	n := int(2*b/(sd/4)) + 1
	n = min(max(n, 101), 401)
	return n | 1
}

// simpson returns n (odd) equally spaced points over [a, b] and their
// Simpson's rule weights.
func simpson(a, b float64, n int) (x, w []float64) {
	x, w = make([]float64, n), make([]float64, n)
	h := (b - a) / float64(n-1)
	for i := range x {
		x[i] = a + float64(i)*h
		switch {
		case i == 0 || i == n-1:
			w[i] = h / 3
		case i%2 == 1:
			w[i] = 4 * h / 3
		default:
			w[i] = 2 * h / 3
		}
	}
	return x, w
}

func normalDensity(x, sd float64) float64 {
	z := x / sd
	return math.Exp(-z*z/2) / (sd * math.Sqrt(2*math.Pi))
}

// boundaryKey names one set of boundaries: they depend on the level and
// on the information at every look, which a plan's repetitions fix.
type boundaryKey struct {
	alpha  float64
	fixedA int // repetitions of a side that does not grow; 0 when both do
	first  int // repetitions at the first look
	last   int // repetitions at the last
}

var boundaryCache sync.Map // boundaryKey → []float64

// lookLevels returns the nominal two-sided level of each look of a plan
// at total level alpha, looks being at first, first+1, … last
// repetitions of the growing side(s). Computed once per plan and level.
func lookLevels(alpha float64, fixedA, first, last int) []float64 {
	k := boundaryKey{alpha: alpha, fixedA: fixedA, first: first, last: last}
	if v, ok := boundaryCache.Load(k); ok {
		return v.([]float64)
	}
	info := make([]float64, 0, last-first+1)
	for n := first; n <= last; n++ {
		info = append(info, information(fixedA, n))
	}
	levels := groupSequential(alpha, info)
	boundaryCache.Store(k, levels)
	return levels
}

// information is the inverse variance of a difference of means, in units
// of one repetition's variance, after n repetitions of the growing side:
// n/2 when both sides grow together, nA·n/(nA+n) against nA that do not.
func information(fixedA, n int) float64 {
	if fixedA == 0 {
		return float64(n) / 2
	}
	return float64(fixedA) * float64(n) / float64(fixedA+n)
}

// LookLevels is the nominal two-sided level of each of looks equally
// informative looks at one question, the looks spending alpha as Decide's
// do: an interval at confidence 1 − level at each look excludes the true
// value at any look with chance alpha in all (the repeated confidence
// intervals of Jennison & Turnbull 2000, ch. 9), where a fixed interval
// looked at again and again would exclude it more often. Equal looks are
// what a search's rounds of one size's fleet give.
func LookLevels(alpha float64, looks int) []float64 {
	return lookLevels(alpha, 0, 1, looks)
}
