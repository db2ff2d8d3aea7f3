package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/vfleet/vfleet/internal/capacity"
	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/report"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/session"
	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/store"
)

// Exit statuses of `vfleet capacity` beyond the common ones
// (docs/results.md): the search ended without an answer of the kind asked.
const (
	// exitFirstFails: not even one guest meets every SLO.
	exitFirstFails = 4
	// exitHitMax: every size up to --max meets every SLO.
	exitHitMax = 5
	// exitOutOfBudget: the measurements ran out before one size was left.
	exitOutOfBudget = 6
)

type capacityFlags struct {
	slos       []string
	max        int
	confidence float64
	jsonPath   string
	htmlPath   string
}

func newCapacityCommand(g *globalOptions) *cobra.Command {
	var f capacityFlags
	cmd := &cobra.Command{
		Use:   "capacity SCENARIO --slo EXPR [--slo EXPR...]",
		Short: "Find the largest fleet that still meets its SLOs: a search, not a sweep",
		Long: `Search for the largest size of the scenario's one scaled group (fleet.scale) that meets
every SLO: grow the fleet by doubling until a size does not, then bisect. Each size is
measured as a run of the scenario at that size, and measured again while an SLO is too
close to call at the confidence. An SLO is

  ` + capacity.Grammar + `

every (the default) bounds the worst guest, median the median guest, total the group's
sum; alone makes the bound a ratio to one guest measured alone (size 1). Examples:

  --slo 'cpu.events_per_sec >= 0.8 alone'  --slo 'rr.net.rtt_us.p99 <= 500us'
  --slo 'total fio.read_iops >= 2000'

Exit status: 0 with an answer, 4 when not even one guest meets every SLO, 5 when every
size up to --max does, 6 when the measurements ran out first (docs/fleet.md).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCapacity(g, args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&f.slos, "slo", nil, "a service-level objective every size must meet (repeat for several)")
	fl.IntVar(&f.max, "max", 0, "the largest size to try (default: the scenario's largest fleet.scale size)")
	fl.Float64Var(&f.confidence, "confidence", stats.DefaultConfidence, "the confidence each size is decided at")
	fl.StringVar(&f.jsonPath, "json", "", "also write the search as JSON to this file (\"-\": standard output)")
	fl.StringVar(&f.htmlPath, "html", "", "where to write the HTML page of the search (default ./vfleet-capacity-ID.html; \"-\" for none)")
	return cmd
}

// capacityRecord is the JSON of a search.
type capacityRecord struct {
	ID       int64            `json:"id"`
	Scenario string           `json:"scenario"`
	Group    string           `json:"group"`
	SLOs     []string         `json:"slos"`
	Headline string           `json:"headline"`
	Result   *capacity.Result `json:"result"`
}

func runCapacity(g *globalOptions, ref string, f capacityFlags) error {
	began := time.Now()
	spec, slos, group, cfg, err := capacityPlan(g, ref, f)
	if err != nil {
		return usageError{err}
	}
	if f.jsonPath != "" {
		if err := checkOutputPath("--json", f.jsonPath); err != nil {
			return usageError{err}
		}
	}
	if err := checkHTMLPath(f.htmlPath); err != nil {
		return usageError{err}
	}
	if err := requireRoot("vfleet capacity"); err != nil {
		return err
	}
	st, err := store.Open(g.db())
	if err != nil {
		return err
	}
	defer st.Close()
	progress := newProgress()
	ctx, cancel := signalContext(progress)
	defer cancel()
	sess, err := session.Prepare(ctx, g.session(progress), spec)
	if err != nil {
		return err
	}
	opts := sess.Options(ctx, st)
	cfg.Measured = func(p capacity.Point) { progress.Logf("%s", p.Describe(slos)) }
	progress.Logf("capacity of %s in %s: up to %d guests, %s; results in %s", group.Name, spec.Name, cfg.Max, limitNote(cfg), g.db())
	res, err := capacity.Search(ctx, &capacity.Fleet{Spec: spec, Group: group.Name, Options: opts, Store: st}, cfg)
	progress.Done()
	if err != nil {
		switch {
		case interrupted(err):
			return exitError{exitInterrupted, errors.New("interrupted; the sizes measured so far are kept as runs, the search is not stored")}
		case errors.Is(err, capacity.ErrUnknownMetric), errors.Is(err, capacity.ErrUnit):
			// An SLO the first size showed to be wrong.
			return usageError{err}
		}
		return err
	}
	rec := capacityRecord{Scenario: spec.Name, Group: group.Name, SLOs: f.slos, Headline: res.Headline(slos), Result: res}
	result, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("encode the search: %w", err)
	}
	rec.ID, err = st.AddCapacitySearch(context.WithoutCancel(ctx), &store.CapacitySearch{
		ScenarioName: spec.Name, ScenarioHash: spec.Hash(), SLOs: f.slos, Result: result,
		Host: opts.Host, Started: began, Finished: time.Now(),
	})
	if err != nil {
		return err
	}
	fmt.Println(rec.Headline)
	fmt.Println()
	if err := res.WriteTable(os.Stdout, slos); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "capacity search %d stored; %d runs in %s\n", rec.ID, res.Measurements, time.Since(began).Round(time.Second))
	if f.jsonPath != "" {
		if err := writeJSON(f.jsonPath, rec); err != nil {
			return err
		}
	}
	if f.htmlPath != "-" {
		path := cmp.Or(f.htmlPath, fmt.Sprintf("vfleet-capacity-%d.html", rec.ID))
		if err := writeCapacityHTML(path, res, slos, fmt.Sprintf("vfleet capacity %d · %s · %s", rec.ID, spec.Name, group.Name), opts.Host); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "HTML page: %s\n", path)
	}
	return capacityOutcome(res)
}

// capacityPlan checks everything the command line and the scenario say
// before anything starts.
func capacityPlan(g *globalOptions, ref string, f capacityFlags) (*scenario.Spec, []capacity.SLO, scenario.GuestGroup, capacity.Config, error) {
	var cfg capacity.Config
	if len(f.slos) == 0 {
		return nil, nil, scenario.GuestGroup{}, cfg, errors.New("give at least one --slo, like 'cpu.events_per_sec >= 0.8 alone'")
	}
	if !(f.confidence > 0 && f.confidence < 1) {
		return nil, nil, scenario.GuestGroup{}, cfg, fmt.Errorf("--confidence %g: want a level between 0 and 1, like 0.95", f.confidence)
	}
	if f.max < 0 || f.max > scenario.MaxGuests {
		return nil, nil, scenario.GuestGroup{}, cfg, fmt.Errorf("--max %d: want a size between 1 and %d", f.max, scenario.MaxGuests)
	}
	spec, err := scenario.Load(ref, session.ScenarioOptions(g.stateDir))
	if err != nil {
		return nil, nil, scenario.GuestGroup{}, cfg, err
	}
	group, err := spec.ScaledGroup()
	if err != nil {
		return nil, nil, scenario.GuestGroup{}, cfg, err
	}
	catalog := capacity.CatalogOf(spec)
	slos := make([]capacity.SLO, len(f.slos))
	for i, expr := range f.slos {
		if slos[i], err = capacity.ParseSLO(expr, catalog); err != nil {
			return nil, nil, scenario.GuestGroup{}, cfg, err
		}
	}
	host, err := scenario.ThisHost()
	if err != nil {
		return nil, nil, scenario.GuestGroup{}, cfg, err
	}
	cfg = capacity.Config{SLOs: slos, Max: f.max, Confidence: f.confidence}
	if cfg.Max == 0 {
		cfg.Max = spec.Fleet.Scale[len(spec.Fleet.Scale)-1]
	}
	cfg.Limit, cfg.LimitReason = capacity.HostLimit(spec, group, host)
	if cfg.LimitReason != "" && cfg.Limit < 1 {
		return nil, nil, scenario.GuestGroup{}, cfg, fmt.Errorf("group %s: not even one guest fits on this host (%s)", group.Name, cfg.LimitReason)
	}
	return spec, slos, group, cfg, nil
}

func limitNote(cfg capacity.Config) string {
	if cfg.LimitReason == "" {
		return "no host limit"
	}
	return "host limit " + cfg.LimitReason
}

// capacityOutcome is the exit status of a finished search.
func capacityOutcome(res *capacity.Result) error {
	switch res.Outcome {
	case capacity.FirstFails:
		return exitError{exitFirstFails, errors.New("not even one guest meets every SLO")}
	case capacity.HitMax:
		return exitError{exitHitMax, fmt.Errorf("every size up to --max %d meets every SLO", res.Answer)}
	case capacity.OutOfBudget:
		return exitError{exitOutOfBudget, errors.New("the search ran out of measurements before it was done")}
	}
	return nil
}

func writeCapacityHTML(path string, res *capacity.Result, slos []capacity.SLO, title string, host hostinfo.Fingerprint) error {
	page, err := res.Page(title, slos, host)
	if err != nil {
		return err
	}
	if err := writeOutput(path, func(w io.Writer) error { return report.WriteCapacityHTML(w, page) }); err != nil {
		return fmt.Errorf("write HTML page: %w", err)
	}
	return nil
}

// writeJSON writes v indented to the file at path, or to standard output
// for "-".
func writeJSON(path string, v any) error {
	return writeOutput(path, func(w io.Writer) error { return encodeIndented(w, v) })
}

func encodeIndented(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
