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
	"github.com/vfleet/vfleet/internal/remoterun"
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
	maxGiven   bool // --max given: without it, the scenario's largest size
	confidence float64
	jsonPath   string
	htmlPath   string
}

func newCapacityCommand(g *globalOptions) *cobra.Command {
	var f capacityFlags
	var on onFlags
	var stopOnEOF bool
	cmd := &cobra.Command{
		Use:   "capacity SCENARIO --slo EXPR [--slo EXPR...]",
		Short: "Find the largest fleet that still meets its SLOs: a search, not a sweep",
		Long: `Search for the largest size of the scenario's one scaled group (fleet.scale) that meets
every SLO: grow the fleet by doubling until a size does not, then bisect. Each size is
measured as a run of the scenario at that size, and measured again while an SLO is
undecided, up to three times: each measurement is a look, and the looks share the
error the confidence allows, so looking again does not make a wrong verdict likelier.
An SLO is

  ` + capacity.Grammar + `

every (the default) bounds the worst guest, median the median guest, total the group's
sum; alone makes the bound a ratio to one guest measured alone (size 1). Examples:

  --slo 'cpu.events_per_sec >= 0.8 alone'  --slo 'rr.net.rtt_us.p99 <= 500us'
  --slo 'total fio.read_iops >= 2000'

With --on, the search runs on each machine named instead of this one, as 'vfleet run
--on' runs a scenario there: each size's runs and the search come back into this
machine's results, marked with the machine, and each machine gets its own answer.

Exit status: 0 with an answer, 4 when not even one guest meets every SLO, 5 when every
size up to --max does, 6 when the measurements ran out first; with --on, 1 when a
machine failed, else the first machine's without an answer (docs/fleet.md).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := on.checkAlone(); err != nil {
				return err
			}
			f.maxGiven = cmd.Flags().Changed("max")
			if len(on.urls) > 0 {
				return capacityOn(g, args[0], f, &on)
			}
			var eof io.Reader
			if stopOnEOF {
				eof = os.Stdin
			}
			return runCapacity(g, args[0], f, eof)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&f.slos, "slo", nil, "a service-level objective every size must meet (repeat for several)")
	fl.IntVar(&f.max, "max", 0, "the largest size to try (default: the scenario's largest fleet.scale size)")
	fl.Float64Var(&f.confidence, "confidence", stats.DefaultConfidence, "the confidence each size is decided at")
	fl.StringVar(&f.jsonPath, "json", "", "also write the search as JSON to this file (\"-\": standard output)")
	fl.StringVar(&f.htmlPath, "html", "", "where to write the HTML page of the search (default ./vfleet-capacity-ID.html; \"-\" for none)")
	on.register(fl, "search on these machines instead of this one", true)
	// How vfleet on one machine stops the search it started on another.
	fl.BoolVar(&stopOnEOF, remoterun.StopOnEOFFlag, false, "stop the search as Ctrl-C does when standard input ends")
	fl.MarkHidden(remoterun.StopOnEOFFlag)
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

func runCapacity(g *globalOptions, ref string, f capacityFlags, eof io.Reader) error {
	began := time.Now()
	spec, slos, group, cfg, err := capacityPlan(g, ref, f)
	if err != nil {
		return usageError{err}
	}
	if err := checkCapacityOutputs(g, f); err != nil {
		return err
	}
	if err := requireRoot("vfleet capacity"); err != nil {
		return err
	}
	wk, err := g.begin(workOptions{eof: eof})
	if err != nil {
		return err
	}
	defer wk.end()
	st, progress, ctx := wk.st, wk.progress, wk.ctx
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
	if err := storeSearch(context.WithoutCancel(ctx), st, &rec, spec.Hash(), opts.Host, began, time.Now()); err != nil {
		return err
	}
	if err := showCapacity(g, rec, slos, f, false, opts.Host); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "capacity search %d stored; %d runs in %s\n", rec.ID, res.Measurements, time.Since(began).Round(time.Second))
	return capacityOutcome(res)
}

// checkCapacityOutputs refuses, before the search, files it could not
// write at its end.
func checkCapacityOutputs(g *globalOptions, f capacityFlags) error {
	if f.jsonPath != "" {
		if err := g.checkOutputPath("--json", f.jsonPath); err != nil {
			return usageError{err}
		}
	}
	if err := g.checkHTMLPath(f.htmlPath); err != nil {
		return usageError{err}
	}
	return nil
}

// storeSearch records the search and gives rec its id.
func storeSearch(ctx context.Context, st *store.Store, rec *capacityRecord, scenarioHash string, host hostinfo.Fingerprint, began, ended time.Time) error {
	result, err := json.Marshal(rec.Result)
	if err != nil {
		return fmt.Errorf("encode the search: %w", err)
	}
	rec.ID, err = st.AddCapacitySearch(ctx, &store.CapacitySearch{
		ScenarioName: rec.Scenario, ScenarioHash: scenarioHash, SLOs: rec.SLOs, Result: result,
		Host: host, Started: began, Finished: ended,
	})
	return err
}

// showCapacity prints a stored search's answer and its table, and writes
// its JSON and HTML page where the flags say; many numbers the files
// named, one search's each.
func showCapacity(g *globalOptions, rec capacityRecord, slos []capacity.SLO, f capacityFlags, many bool, host hostinfo.Fingerprint) error {
	fmt.Println(rec.Headline)
	fmt.Println()
	if err := rec.Result.WriteTable(os.Stdout, slos); err != nil {
		return err
	}
	if f.jsonPath != "" {
		if err := g.writeJSON(numbered(f.jsonPath, ".json", rec.ID, many), rec); err != nil {
			return err
		}
	}
	if f.htmlPath != "-" {
		path := cmp.Or(numbered(f.htmlPath, ".html", rec.ID, many), fmt.Sprintf("vfleet-capacity-%d.html", rec.ID))
		if err := writeCapacityHTML(g, path, rec.Result, slos, fmt.Sprintf("vfleet capacity %d · %s · %s", rec.ID, rec.Scenario, rec.Group), host); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "HTML page: %s\n", path)
	}
	return nil
}

// capacityPlan checks everything the command line and the scenario say
// before anything starts.
func capacityPlan(g *globalOptions, ref string, f capacityFlags) (*scenario.Spec, []capacity.SLO, scenario.GuestGroup, capacity.Config, error) {
	var cfg capacity.Config
	spec, slos, group, err := capacitySLOs(ref, f, session.ScenarioOptions(g.stateDir))
	if err != nil {
		return nil, nil, scenario.GuestGroup{}, cfg, err
	}
	host, err := scenario.ThisHost()
	if err != nil {
		return nil, nil, scenario.GuestGroup{}, cfg, err
	}
	cfg = capacity.Config{SLOs: slos, Max: f.max, Confidence: f.confidence}
	if !f.maxGiven {
		cfg.Max = spec.Fleet.Scale[len(spec.Fleet.Scale)-1]
	}
	cfg.Limit, cfg.LimitReason = capacity.HostLimit(spec, group, host)
	if cfg.LimitReason != "" && cfg.Limit < 1 {
		return nil, nil, scenario.GuestGroup{}, cfg, fmt.Errorf("group %s: not even one guest fits on this host (%s)", group.Name, cfg.LimitReason)
	}
	return spec, slos, group, cfg, nil
}

// capacitySLOs checks the flags, the scenario (by opts) and its scaled
// group, and reads the SLOs against what the scenario can produce.
func capacitySLOs(ref string, f capacityFlags, opts scenario.Options) (*scenario.Spec, []capacity.SLO, scenario.GuestGroup, error) {
	if len(f.slos) == 0 {
		return nil, nil, scenario.GuestGroup{}, errors.New("give at least one --slo, like 'cpu.events_per_sec >= 0.8 alone'")
	}
	if !(f.confidence > 0 && f.confidence < 1) {
		return nil, nil, scenario.GuestGroup{}, fmt.Errorf("--confidence %g: want a level between 0 and 1, like 0.95", f.confidence)
	}
	if f.maxGiven && (f.max < 1 || f.max > scenario.MaxGuests) {
		return nil, nil, scenario.GuestGroup{}, fmt.Errorf("--max %d: want a size between 1 and %d", f.max, scenario.MaxGuests)
	}
	spec, err := scenario.Load(ref, opts)
	if err != nil {
		return nil, nil, scenario.GuestGroup{}, err
	}
	group, err := spec.ScaledGroup()
	if err != nil {
		return nil, nil, scenario.GuestGroup{}, err
	}
	catalog := capacity.CatalogOf(spec)
	slos := make([]capacity.SLO, len(f.slos))
	for i, expr := range f.slos {
		if slos[i], err = capacity.ParseSLO(expr, catalog); err != nil {
			return nil, nil, scenario.GuestGroup{}, err
		}
	}
	return spec, slos, group, nil
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

func writeCapacityHTML(g *globalOptions, path string, res *capacity.Result, slos []capacity.SLO, title string, host hostinfo.Fingerprint) error {
	page, err := res.Page(title, slos, host)
	if err != nil {
		return err
	}
	if err := g.writeOutput(path, func(w io.Writer) error { return report.WriteCapacityHTML(w, page) }); err != nil {
		return fmt.Errorf("write HTML page: %w", err)
	}
	return nil
}

// writeJSON writes v indented to the file at path, or to standard output
// for "-".
func (g *globalOptions) writeJSON(path string, v any) error {
	return g.writeOutput(path, func(w io.Writer) error { return encodeIndented(w, v) })
}

func encodeIndented(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
