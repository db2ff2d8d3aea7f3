// Package workload owns the adapters between vfleet and the measuring tools:
// for each tool, the argv that runs it and a pure parser of its output.
//
// Lifecycle: a Spec (name + parameters from the scenario) is validated up
// front with Lookup/Validate; at run time Command builds the argv that the
// agent executes inside a guest, and Parse turns the captured output into
// Samples. Parsers never touch the system, so they are tested on outputs
// recorded from real runs under testdata/.
package workload

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/workload/programs"
)

// Better says which direction of a metric is an improvement. Reports use it
// to normalise (bigger-is-better ratios stay as they are, smaller-is-better
// ratios are inverted for the index) and to colour changes.
type Better string

const (
	HigherIsBetter Better = "higher"
	LowerIsBetter  Better = "lower"
)

// Sample is one measured value, as parsed from one execution of a tool.
type Sample struct {
	Metric string  // stable identifier, e.g. "cpu.events_per_s"
	Unit   string  // e.g. "events/s", "MiB/s", "us"
	Value  float64 // in Unit
	Better Better
	Hist   *stats.Histogram // the full distribution behind a latency sample, nil for scalars
}

// Params are the resolved parameters of one workload execution. Every value
// is recorded with each sample, so they are plain strings.
type Params map[string]string

// Exec describes how to run one execution inside a guest.
type Exec struct {
	Argv []string
	// Runs are the programs Argv's own program runs in its turn (the
	// encoder vfleet-encode times), which the guest's image must have too.
	Runs []string
	// Timeout bounds the whole execution; the agent kills the process group
	// when it passes.
	Timeout time.Duration
	// WorkDir is where the tool runs; file-I/O workloads write there. Empty
	// means the guest's default scratch directory.
	WorkDir string
	// MaxOutput is how many bytes of stdout the parser needs kept; 0 means
	// the agent's default (agent.MaxOutput). Passed as agent.Request.MaxOutput.
	MaxOutput int64
	// StopAfter, when above 0, ends the tool after that long (SIGINT
	// first); its output up to then is what is parsed.
	StopAfter time.Duration
}

// Workload is one adapter. Implementations are stateless.
type Workload interface {
	// Name is the identifier used in scenarios, e.g. "cpu".
	Name() string
	// Programs are every program the adapter runs, in the guest or on
	// the network peer (its servers, its background load), Tool first,
	// each with what puts it into vfleet's image. None for a workload that
	// runs the user's programs, which the user's image must have.
	Programs() []Program
	// Defaults returns every parameter the workload accepts with its default.
	// Validate rejects keys not present here.
	Defaults() Params
	// Validate checks a fully resolved parameter set.
	Validate(p Params) error
	// Command builds the execution for the given resolved parameters and
	// the nominal duration of the measurement.
	Command(p Params, duration time.Duration) (Exec, error)
	// Parse turns the tool's output into samples. It must be pure.
	Parse(stdout, stderr []byte) ([]Sample, error)
}

// Program is a program a workload runs and where vfleet's image gets it:
// one of programs.Debian, or one of vfleet's own (package image/native),
// with no package.
type Program = programs.Program

// RealTimer is a workload that needs real-time scheduling in its guest;
// a container running it is granted real-time priorities up to
// RTPriority (0: it needs none with these parameters).
type RealTimer interface {
	RTPriority(p Params) int
}

// Headliner is a workload whose story takes more than its first metric:
// summaries that show one figure per workload (the interference matrix)
// show each of these instead.
type Headliner interface {
	Headlines() []string
}

// ErrUnknown is returned by Lookup for a name that is not registered.
var ErrUnknown = errors.New("unknown workload")

var (
	regMu    sync.RWMutex
	registry = map[string]Workload{}
)

// Register makes a workload available by name. It is called from init() of
// the file that implements the adapter and panics on a duplicate name,
// which is a programming error caught by any test.
func Register(w Workload) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[w.Name()]; dup {
		panic("workload registered twice: " + w.Name())
	}
	registry[w.Name()] = w
}

// Lookup returns the workload registered under name.
func Lookup(name string) (Workload, error) {
	regMu.RLock()
	defer regMu.RUnlock()
	w, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %v)", ErrUnknown, name, namesLocked())
	}
	return w, nil
}

// Names lists the registered workloads in sorted order.
func Names() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	return namesLocked()
}

func namesLocked() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ParamsParser is a workload whose output can only be read knowing its
// parameters (a command's metrics are among them); ParseOutput prefers
// it to Parse. Its metrics are the user's, each read on its own: with an
// error it returns those it could read.
type ParamsParser interface {
	ParseParams(p Params, stdout, stderr []byte) ([]Sample, error)
}

// ParseOutput parses an execution's output with the workload's parser.
func ParseOutput(w Workload, p Params, stdout, stderr []byte) ([]Sample, error) {
	if pp, ok := w.(ParamsParser); ok {
		return pp.ParseParams(p, stdout, stderr)
	}
	return w.Parse(stdout, stderr)
}

// Structured is a workload some of whose parameters are lists or
// mappings (a command's argv, its metrics). A scenario passes each of
// them as compact JSON text, so every parameter stays one string that is
// recorded with each sample.
type Structured interface {
	StructuredParams() []string
}

// ParamError is a bad parameter, with where inside a structured one the
// fault lies, so the scenario can point at that line.
type ParamError struct {
	Key string
	// Path leads into the parameter's value: list indexes and mapping keys.
	Path []any
	Msg  string
}

func paramError(key string, path []any, msg string) error {
	return &ParamError{Key: key, Path: path, Msg: msg}
}

// Field is the parameter's name with the path into it, like metrics[1].regex.
func (e *ParamError) Field() string {
	var b strings.Builder
	b.WriteString(e.Key)
	for _, p := range e.Path {
		if i, ok := p.(int); ok {
			fmt.Fprintf(&b, "[%d]", i)
		} else {
			fmt.Fprintf(&b, ".%v", p)
		}
	}
	return b.String()
}

func (e *ParamError) Error() string { return fmt.Sprintf("%v: %s: %s", ErrBadParam, e.Field(), e.Msg) }
func (e *ParamError) Unwrap() error { return ErrBadParam }
