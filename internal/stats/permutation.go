package stats

import (
	"math"
	"math/rand/v2"
)

// exactLimit is the number of ways to split the pooled values up to which
// the permutation test enumerates them all; above it, it samples.
const exactLimit = 20000

// PermutationTest returns the two-sided p-value of the difference between
// the means of a and b under the hypothesis that both come from the same
// distribution: the share of all splits of the pooled values into groups of
// len(a) and len(b) whose difference is at least as large as the observed
// one. It makes no assumption of normality, which few benchmark
// repetitions could not justify. Small samples are enumerated exactly;
// larger ones use `rounds` random splits from a fixed seed, so the answer
// is reproducible. With 3 values each the smallest possible p is 0.1: a
// decision at p < 0.01 needs at least 5 values a side.
func PermutationTest(a, b []float64, rounds int, seed uint64) float64 {
	na, nb := len(a), len(b)
	if na == 0 || nb == 0 {
		return 1
	}
	pooled := append(append([]float64{}, a...), b...)
	total := sum(pooled)
	observed := math.Abs(meanOf(a) - meanOf(b))
	// Differences equal up to rounding must count as "as large".
	eps := 1e-9 * (math.Abs(observed) + 1)
	extreme := func(sumA float64) bool {
		d := math.Abs(sumA/float64(na) - (total-sumA)/float64(nb))
		return d >= observed-eps
	}
	if binomial(na+nb, na) <= exactLimit {
		hits, count := 0, 0
		combinations(len(pooled), na, func(idx []int) {
			s := 0.0
			for _, i := range idx {
				s += pooled[i]
			}
			count++
			if extreme(s) {
				hits++
			}
		})
		return float64(hits) / float64(count)
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	perm := append([]float64{}, pooled...)
	hits := 0
	for r := 0; r < rounds; r++ {
		rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		if extreme(sum(perm[:na])) {
			hits++
		}
	}
	// The observed split is one of the possible ones: counting it keeps the
	// p-value from ever being 0.
	return float64(hits+1) / float64(rounds+1)
}

func sum(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s
}

func meanOf(v []float64) float64 { return sum(v) / float64(len(v)) }

func binomial(n, k int) float64 {
	r := 1.0
	for i := 1; i <= k; i++ {
		r = r * float64(n-k+i) / float64(i)
	}
	return r
}

// combinations calls fn with every k-subset of 0..n-1 (the slice is reused).
func combinations(n, k int, fn func([]int)) {
	idx := make([]int, k)
	for i := range idx {
		idx[i] = i
	}
	for {
		fn(idx)
		i := k - 1
		for i >= 0 && idx[i] == n-k+i {
			i--
		}
		if i < 0 {
			return
		}
		idx[i]++
		for j := i + 1; j < k; j++ {
			idx[j] = idx[j-1] + 1
		}
	}
}

// SmallestP is the smallest p-value the exact permutation test can give
// two samples of na and nb values, however far apart they are: only the
// split observed is as extreme, and with equal sizes its mirror image (the
// samples swapped) too, as the test is two-sided. Ties between the samples
// only make p larger. This is the floor of the enumerated test, which is
// what few repetitions get; sampled splits have their own, 1/(rounds+1).
func SmallestP(na, nb int) float64 {
	if na == 0 || nb == 0 {
		return 1
	}
	extreme := 1.0
	if na == nb {
		extreme = 2
	}
	return extreme / binomial(na+nb, na)
}

// MinRepetitions is the fewest repetitions a side with which the exact
// permutation test can reach p < alpha at all, when each repetition adds
// perA values to one side and perB to the other (a group's guests each
// measure once a repetition): with n values a side the smallest two-sided
// p is 2 / C(2n, n).
func MinRepetitions(alpha float64, perA, perB int) int {
	n := 1
	for SmallestP(n*perA, n*perB) >= alpha {
		n++
	}
	return n
}

// MinRepetitionsAgainst is the fewest repetitions, each adding perB
// values, that the exact permutation test can tell from na values that
// will not grow (a baseline's) at p < alpha. It exists for any alpha > 0:
// the floor falls below 1/(n+1) with n values on the growing side.
func MinRepetitionsAgainst(alpha float64, na, perB int) int {
	n := 1
	for SmallestP(na, n*perB) >= alpha {
		n++
	}
	return n
}
