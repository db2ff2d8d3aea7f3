package capacity

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sort"

	"github.com/vfleet/vfleet/internal/stats"
)

// Measurer measures one fleet size: launches that many guests of the
// scaled group, runs the scenario's steps and returns the group's
// samples. Each call is a fresh fleet; the search pools the calls of one
// size. id names the measurement for the record (a stored run's ID).
type Measurer interface {
	Measure(ctx context.Context, size int) (samples []Sample, id int64, err error)
}

// Config is what a search looks for and how far it may go.
type Config struct {
	SLOs []SLO
	// Max is the largest size to try.
	Max int
	// Confidence is the level of the intervals every verdict rests on.
	Confidence float64
	// Limit, when above 0, is the largest size the host can hold, and
	// LimitReason what runs out beyond it; no size above it is launched.
	Limit       int
	LimitReason string
	// Rounds bounds the measurements of one size, its looks: a size
	// still undecided after them stays so. 0 means DefaultRounds.
	Rounds int
	// Budget bounds the measurements of the whole search; 0 means
	// enough for the doubling and the bisection at Rounds each.
	Budget int
	// Measured, when set, is told of each measurement as it is judged.
	Measured func(Point)
}

// DefaultRounds is how many times an undecided size is measured.
const DefaultRounds = 3

// Outcome says how a search ended.
type Outcome string

const (
	// Found: the largest size that holds is known, and the next one up
	// was measured not to hold.
	Found Outcome = "found"
	// FirstFails: the first size, one guest, does not hold.
	FirstFails Outcome = "first-fails"
	// HitMax: every size up to Max holds.
	HitMax Outcome = "hit-max"
	// HitLimit: every size up to the host's limit holds; a larger one
	// would not fit.
	HitLimit Outcome = "hit-limit"
	// OutOfBudget: the search used its measurements before it narrowed
	// the answer to one size.
	OutOfBudget Outcome = "out-of-budget"
)

// Point is one size as the search measured it.
type Point struct {
	Size int `json:"size"`
	// Measurements are the IDs of the measurements pooled for it.
	Measurements []int64 `json:"measurements"`
	Checks       []Check `json:"checks"`
	Verdict      Verdict `json:"verdict"`
	// Revised marks a size whose verdict changed after it was first
	// decided, when one guest alone was measured again.
	Revised bool `json:"revised,omitempty"`
}

// Result is the search's answer and everything it rests on.
type Result struct {
	Outcome Outcome `json:"outcome"`
	// Answer is the largest size shown to meet every SLO; 0 when none.
	Answer int `json:"answer"`
	// Next is the smallest measured size above Answer that did not hold
	// (fails or undecided), 0 when none was; Limiting is the SLO it
	// failed or could not be shown to meet, -1 when none.
	Next     int `json:"next,omitempty"`
	Limiting int `json:"limiting_slo"`
	// BandLow and BandHigh bound the undecided sizes: above the
	// answer, below the smallest size that fails; both 0 when the answer
	// is followed by a failing size.
	BandLow  int `json:"band_low,omitempty"`
	BandHigh int `json:"band_high,omitempty"`
	// HoldsAbove are sizes above the answer that hold all the same: a
	// verdict revised by a more precise alone figure, or a figure that
	// does not fall with the fleet's size as the search assumes.
	HoldsAbove []int `json:"holds_above,omitempty"`
	// Points are every size measured, smallest first.
	Points []Point `json:"points"`
	// Reference are the measurements of one guest alone beyond size 1's
	// own, pooled into the figure every ratio to alone is to.
	Reference    []int64 `json:"reference,omitempty"`
	Measurements int     `json:"measurements"`
	Confidence   float64 `json:"confidence"`
	Limit        int     `json:"limit,omitempty"`
	LimitReason  string  `json:"limit_reason,omitempty"`
}

// ErrConfig is matched by the errors of a configuration that cannot
// search.
var ErrConfig = errors.New("invalid capacity search")

// Search grows the fleet by doubling from one guest until a size does not
// meet every SLO (or Max or the host's limit is reached), then bisects
// between the largest size that held and the smallest that did not. Each
// size is measured until every SLO is decided, or one fails, or Rounds
// measurements leave it undecided: each measurement is a look, and the
// looks share 1 − Confidence as a comparison's do (stats.LookLevels), so
// that looking again does not raise the chance of a wrong verdict. An
// undecided size counts as not holding, so the answer is a size shown
// to hold. With several SLOs each takes an equal share of a look's level,
// so 1 − Confidence bounds a wrong verdict on any of them. It assumes
// what it bounds degrades with the fleet's size: it
// measures no size between two whose verdicts it already has.
func Search(ctx context.Context, m Measurer, cfg Config) (*Result, error) {
	if len(cfg.SLOs) == 0 || cfg.Max < 1 || cfg.Confidence <= 0 || cfg.Confidence >= 1 {
		return nil, fmt.Errorf("%w: want at least one SLO, a maximum of 1 or more and a confidence between 0 and 1", ErrConfig)
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = DefaultRounds
	}
	if cfg.Budget <= 0 {
		// Doubling to Max, then bisecting back down: two sizes per
		// power of two at most, and the first.
		cfg.Budget = cfg.Rounds * (2*bits.Len(uint(cfg.Max)) + 1)
	}
	s := &search{m: m, cfg: cfg, points: map[int]*Point{}, samples: map[int][]Sample{}, rounds: map[int]int{},
		levels: stats.LookLevels(1-cfg.Confidence, cfg.Rounds)}
	res, err := s.run(ctx)
	if res != nil {
		res.Points = s.sorted()
		res.Measurements = s.used
		res.Reference = s.reference
		res.Confidence = cfg.Confidence
		res.Limit, res.LimitReason = cfg.Limit, cfg.LimitReason
		s.explain(res)
	}
	return res, err
}

type search struct {
	m       Measurer
	cfg     Config
	points  map[int]*Point
	samples map[int][]Sample
	// levels are the two-sided levels of a size's looks, one a
	// measurement, spending 1 − Confidence over Rounds of them.
	levels []float64
	// rounds counts the measurements of each size, its samples' Round.
	rounds map[int]int
	// reference are the measurements of one guest alone made to narrow
	// the alone figure, beyond size 1's own.
	reference []int64
	used      int
}

// errBudget ends a search that has used its measurements.
var errBudget = errors.New("out of budget")

// run picks each next size from the verdicts so far, which a more
// precise alone figure may have revised: doubling while every size
// measured holds, then bisecting between the largest that holds and the
// smallest that does not.
func (s *search) run(ctx context.Context) (*Result, error) {
	top := s.cfg.Max
	if s.cfg.Limit > 0 && s.cfg.Limit < top {
		top = s.cfg.Limit
	}
	for {
		good, bad := s.bounds()
		var size int
		switch {
		case bad == 1:
			return &Result{Outcome: FirstFails}, nil
		case bad == 0 && good == top && top == s.cfg.Max:
			return &Result{Outcome: HitMax, Answer: good}, nil
		case bad == 0 && good == top:
			return &Result{Outcome: HitLimit, Answer: good}, nil
		case bad == 0:
			size = min(max(2*good, 1), top)
		case bad-good == 1:
			return &Result{Outcome: Found, Answer: good}, nil
		default:
			size = good + (bad-good)/2
		}
		if _, err := s.decide(ctx, size); err != nil {
			good, _ = s.bounds()
			if errors.Is(err, errBudget) {
				err = nil
			}
			return &Result{Outcome: OutOfBudget, Answer: good}, err
		}
	}
}

// bounds are the largest size that holds with every smaller size measured
// holding too, and the smallest size that does not hold (0: none yet).
func (s *search) bounds() (good, bad int) {
	for _, p := range s.sorted() {
		if p.Verdict != Holds {
			return good, p.Size
		}
		good = p.Size
	}
	return good, 0
}

// decide measures a size until its verdict is known or its rounds are
// spent. A round after the first measures one guest alone again instead
// when what keeps a ratio to alone undecided is the alone figure's own
// interval: measuring the size again would not narrow it.
func (s *search) decide(ctx context.Context, size int) (Verdict, error) {
	p := &Point{Size: size}
	s.points[size] = p
	forget := func() {
		if len(p.Measurements) == 0 {
			delete(s.points, size)
		}
	}
	for round := 0; round < s.cfg.Rounds; round++ {
		if s.used >= s.cfg.Budget {
			forget()
			return Undecided, errBudget
		}
		if err := ctx.Err(); err != nil {
			forget()
			return Undecided, err
		}
		at := size
		if round > 0 && s.referenceLimits(p) {
			at = 1
		}
		samples, id, err := s.m.Measure(ctx, at)
		s.used++
		if err != nil {
			forget()
			return Undecided, fmt.Errorf("measure %d guests: %w", at, err)
		}
		if at == 1 && len(s.samples[1]) == 0 {
			if err := CheckMeasured(s.cfg.SLOs, samples); err != nil {
				forget()
				return Undecided, err
			}
		}
		for i := range samples {
			samples[i].Round = s.rounds[at]
		}
		s.rounds[at]++
		s.samples[at] = append(s.samples[at], samples...)
		if at == size {
			p.Measurements = append(p.Measurements, id)
		} else {
			s.reference = append(s.reference, id)
		}
		if at == 1 {
			// Every ratio to alone was judged against the old figure.
			for _, q := range s.points {
				before := q.Verdict
				s.judge(q)
				q.Revised = q.Revised || q != p && before != q.Verdict
			}
		} else {
			s.judge(p)
		}
		if s.cfg.Measured != nil {
			s.cfg.Measured(*p)
		}
		if p.Verdict != Undecided {
			break
		}
	}
	return p.Verdict, nil
}

// judge gives a point its checks and verdict: each SLO's looks replayed,
// one a measurement of the size, each from the samples of the
// measurements made by then (the last from all of them) and the alone
// figure as it stands, at the level the look was given; an SLO decided
// at a look keeps that verdict. Judging every look at the full
// confidence would give a figure sitting on its bound a fresh chance
// to be called holding or failing at each.
func (s *search) judge(p *Point) {
	p.Checks = p.Checks[:0]
	looks := len(p.Measurements)
	for i, slo := range s.cfg.SLOs {
		var c Check
		for look := 1; look <= looks; look++ {
			samples := s.samples[p.Size]
			if look < looks {
				samples = slices.DeleteFunc(slices.Clone(samples), func(x Sample) bool { return x.Round >= look })
			}
			// Every SLO must hold for the size to: each is judged at its
			// share of the look's level (Bonferroni), so that the chance of
			// a wrong verdict on any of them stays the look's.
			level := s.levels[look-1] / float64(len(s.cfg.SLOs))
			c = judge(slo, i, p.Size, samples, aloneSummary(slo, s.samples[1], 1-level), 1-level)
			c.Look, c.Level = look, level
			if c.Verdict != Undecided {
				break
			}
		}
		p.Checks = append(p.Checks, c)
	}
	p.Verdict = overall(p.Checks)
}

// referenceLimits tells whether an undecided ratio to alone of the point
// is less precise for the alone figure's sake than for its own.
func (s *search) referenceLimits(p *Point) bool {
	for _, c := range p.Checks {
		if c.Verdict == Undecided && s.cfg.SLOs[c.SLO].Alone && c.aloneWidth >= c.ownWidth {
			return true
		}
	}
	return false
}

func (s *search) sorted() []Point {
	out := make([]Point, 0, len(s.points))
	for _, p := range s.points {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Size < out[j].Size })
	return out
}

// explain fills in the size above the answer, the SLO that limits it and
// the undecided band: the sizes above the answer and below the
// smallest that fails, measured undecided or not measured at all.
func (s *search) explain(res *Result) {
	res.Limiting = -1
	firstFail, lastUndecided := 0, 0
	for _, p := range res.Points {
		if p.Size > res.Answer && p.Verdict == Holds {
			res.HoldsAbove = append(res.HoldsAbove, p.Size)
		}
	}
	for _, p := range res.Points {
		if p.Size <= res.Answer {
			continue
		}
		if res.Next == 0 {
			res.Next = p.Size
			res.Limiting = limiting(p)
		}
		if p.Verdict == Fails {
			firstFail = p.Size
			break
		}
		lastUndecided = p.Size
	}
	switch {
	case firstFail > res.Answer+1:
		res.BandLow, res.BandHigh = res.Answer+1, firstFail-1
	case firstFail == 0 && lastUndecided > 0:
		res.BandLow, res.BandHigh = res.Answer+1, lastUndecided
	}
}

// limiting is the SLO a size that did not hold failed, or else the first
// it could not be shown to meet.
func limiting(p Point) int {
	for _, want := range []Verdict{Fails, Undecided} {
		for _, c := range p.Checks {
			if c.Verdict == want {
				return c.SLO
			}
		}
	}
	return -1
}
