package workload

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ohler55/ojg/jp"

	"github.com/vfleet/vfleet/internal/agent"
)

// command runs a program of the user's, in the guest's image, and takes
// the metrics the user names from its output: a regular expression's first
// group, or a JSONPath into output that is one JSON document. Its samples
// are stored and reported like any built-in workload's.
type command struct{}

func init() { Register(command{}) }

// The ways a command's run ends (parameter "stop").
const (
	// StopExit: the program ends by itself; "{duration}" in its argv
	// becomes the step's duration in whole seconds, for programs that take
	// their run time as an argument.
	StopExit = "exit"
	// StopDuration: vfleet ends it after the step's duration with SIGINT,
	// as a user stops a load generator, and parses what it printed.
	StopDuration = "duration"
)

// DurationPlaceholder in an argv element is replaced by the step's
// duration in whole seconds.
const DurationPlaceholder = "{duration}"

func (command) Name() string { return "command" }

// Tool is empty: the program is the user's, named by argv.

// Programs: none of vfleet's; the user's image has the user's programs.
func (command) Programs() []Program { return nil }

func (command) Defaults() Params {
	return Params{"argv": "", "metrics": "", "workdir": "", "timeout": "", "stop": StopExit}
}

// StructuredParams: argv is a list, metrics a list of mappings.
func (command) StructuredParams() []string { return []string{"argv", "metrics"} }

// MetricSpec is one metric a command's output yields.
type MetricSpec struct {
	Name   string `json:"name"`
	Unit   string `json:"unit"`
	Better Better `json:"better"`
	// Regex's first group is the value; exactly one of Regex and JSON.
	Regex string `json:"regex,omitempty"`
	// JSON is a JSONPath into the output, which must then be one JSON
	// document, selecting exactly one number.
	JSON string `json:"json,omitempty"`
}

var metricNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

// commandSpec is a command's parameters decoded.
type commandSpec struct {
	argv    []string
	metrics []MetricSpec
	regexps []*regexp.Regexp // parallel to metrics, nil for a JSON metric
	paths   []jp.Expr        // parallel to metrics, nil for a regex metric
	timeout time.Duration    // 0: the default for the duration
	stop    string
	workdir string
}

func (command) decode(p Params) (commandSpec, error) {
	var c commandSpec
	if p["argv"] == "" {
		return c, paramError("argv", nil, "missing: the program and its arguments, as a list like [sysbench, cpu, run]")
	}
	argv, err := decodeArgv(p, "argv")
	if err != nil {
		return c, err
	}
	c.argv = argv
	if p["metrics"] == "" {
		return c, paramError("metrics", nil, "missing: the metrics to take from the output, each {name, unit, better, regex or json}")
	}
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(p["metrics"]), &raw); err != nil || len(raw) == 0 {
		return c, paramError("metrics", nil, "want a non-empty list of {name, unit, better, regex or json}")
	}
	seen := map[string]int{}
	for i, r := range raw {
		m, re, path, err := decodeMetric(r, i)
		if err != nil {
			return c, err
		}
		if first, dup := seen[m.Name]; dup {
			return c, paramError("metrics", []any{i, "name"}, fmt.Sprintf("%q is already the name of metrics[%d]", m.Name, first))
		}
		seen[m.Name] = i
		c.metrics, c.regexps, c.paths = append(c.metrics, m), append(c.regexps, re), append(c.paths, path)
	}
	if t := p["timeout"]; t != "" {
		d, err := time.ParseDuration(t)
		if err != nil || d < agent.MinTimeout || d > 24*time.Hour {
			return c, paramError("timeout", nil, fmt.Sprintf("%q: want a duration from %s to 24h, like 90s or 10m", Clip(t), agent.MinTimeout))
		}
		c.timeout = d
	}
	stop, err := enumParam(p, "stop", StopExit, StopDuration)
	if err != nil {
		return c, err
	}
	c.stop = stop
	if w := p["workdir"]; w != "" && !strings.HasPrefix(w, "/") {
		return c, paramError("workdir", nil, fmt.Sprintf("%q: want an absolute path in the guest", Clip(w)))
	}
	c.workdir = p["workdir"]
	return c, nil
}

// decodeArgv reads a list parameter that is a program and its arguments;
// an absent one is nil.
func decodeArgv(p Params, key string) ([]string, error) {
	if p[key] == "" {
		return nil, nil
	}
	var argv []string
	if err := json.Unmarshal([]byte(p[key]), &argv); err != nil || len(argv) == 0 {
		return nil, paramError(key, nil, "want a non-empty list of strings, the program first, like [sysbench, cpu, run] (no shell: write [sh, -c, '...'] for one)")
	}
	for i, a := range argv {
		if a == "" && i == 0 {
			return nil, paramError(key, []any{0}, "the program is empty")
		}
		if strings.ContainsRune(a, 0) {
			return nil, paramError(key, []any{i}, "contains a NUL byte")
		}
	}
	return argv, nil
}

func decodeMetric(raw json.RawMessage, i int) (MetricSpec, *regexp.Regexp, jp.Expr, error) {
	var m MetricSpec
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		msg := "want a mapping of name, unit, better and regex or json"
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			msg = fmt.Sprintf("unknown field %s (allowed: name, unit, better, regex, json)", f)
		}
		return m, nil, nil, paramError("metrics", []any{i}, msg)
	}
	at := func(field string) []any { return []any{i, field} }
	switch {
	case !metricNameRE.MatchString(m.Name):
		return m, nil, nil, paramError("metrics", at("name"), fmt.Sprintf("%q: want lower-case letters, digits and _, starting with a letter", Clip(m.Name)))
	case m.Unit == "" || len(m.Unit) > 32:
		return m, nil, nil, paramError("metrics", at("unit"), "want the unit the value is in, like ops/s, MiB/s, us or score")
	case m.Better != HigherIsBetter && m.Better != LowerIsBetter:
		return m, nil, nil, paramError("metrics", at("better"), fmt.Sprintf("%q: want higher or lower", Clip(string(m.Better))))
	case (m.Regex == "") == (m.JSON == ""):
		return m, nil, nil, paramError("metrics", []any{i}, "give exactly one of regex (its first group is the value) and json (a JSONPath like $.jobs[0].iops)")
	}
	if m.Regex != "" {
		re, err := regexp.Compile(m.Regex)
		if err != nil {
			return m, nil, nil, paramError("metrics", at("regex"), fmt.Sprintf("not a regular expression: %v", err))
		}
		if re.NumSubexp() == 0 {
			return m, nil, nil, paramError("metrics", at("regex"), "has no group: put the value in parentheses, like 'Score\\s+([0-9.]+)'")
		}
		return m, re, nil, nil
	}
	path, err := jp.ParseString(m.JSON)
	if err != nil {
		return m, nil, nil, paramError("metrics", at("json"), fmt.Sprintf("not a JSONPath: %v", err))
	}
	return m, nil, path, nil
}

func (w command) Validate(p Params) error {
	if err := checkKeys(w, p); err != nil {
		return err
	}
	_, err := w.decode(p)
	return err
}

func (w command) Command(p Params, d time.Duration) (Exec, error) {
	c, err := w.decode(p)
	if err != nil {
		return Exec{}, err
	}
	return c.exec(d, strings.NewReplacer(DurationPlaceholder, strconv.Itoa(seconds(d)))), nil
}

// exec is the command's execution for a step of duration d, with the
// placeholders in its argv replaced.
func (c commandSpec) exec(d time.Duration, placeholders *strings.Replacer) Exec {
	ex := Exec{Argv: replaceEach(c.argv, placeholders), Timeout: c.timeout, WorkDir: c.workdir}
	if ex.Timeout == 0 {
		ex.Timeout = timeoutFor(d)
	}
	if c.stop == StopDuration {
		ex.StopAfter = d
	}
	return ex
}

// Parse cannot know the metrics without the parameters.
func (command) Parse([]byte, []byte) ([]Sample, error) {
	return nil, errors.New("command: parsing needs the parameters (ParseParams)")
}

// ParseParams takes every metric from stdout. A metric that is not there
// fails, quoting the start of the output; the others are still returned,
// with the error.
func (w command) ParseParams(p Params, stdout, _ []byte) ([]Sample, error) {
	c, err := w.decode(p)
	if err != nil {
		return nil, err
	}
	var doc any
	var docErr error
	parsedDoc := false
	out := make([]Sample, 0, len(c.metrics))
	var errs []error
	// The start of the output is quoted once, however many metrics miss.
	quoted := false
	begins := func(intro string) string {
		if quoted {
			return ""
		}
		quoted = true
		return intro + head(stdout)
	}
	for i, m := range c.metrics {
		var v float64
		if re := c.regexps[i]; re != nil {
			g := re.FindSubmatch(stdout)
			if g == nil {
				errs = append(errs, fmt.Errorf("%w: metric %s: /%s/ matches nothing in the output%s", ErrParse, m.Name, m.Regex, begins(", which begins:\n")))
				continue
			}
			if v, err = strconv.ParseFloat(strings.TrimSpace(string(g[1])), 64); err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				errs = append(errs, fmt.Errorf("%w: metric %s: /%s/ matched %q, which is not a number", ErrParse, m.Name, m.Regex, Clip(string(g[1]))))
				continue
			}
		} else {
			if !parsedDoc {
				doc, docErr = parseDocument(stdout)
				parsedDoc = true
			}
			if docErr != nil {
				errs = append(errs, fmt.Errorf("%w: metric %s: the output is not one JSON document (%v)%s", ErrParse, m.Name, docErr, begins("; it begins:\n")))
				continue
			}
			if v, err = jsonNumber(c.paths[i].Get(doc)); err != nil {
				errs = append(errs, fmt.Errorf("%w: metric %s: %s %v", ErrParse, m.Name, m.JSON, err))
				continue
			}
		}
		out = append(out, Sample{Metric: m.Name, Unit: m.Unit, Value: v, Better: m.Better})
	}
	return out, errors.Join(errs...)
}

// outOfRange is a number of the output beyond a float64's range (1e999),
// kept in the document so that only a metric selecting it fails.
type outOfRange string

// parseDocument reads the output as one JSON document, its numbers
// float64s as json.Unmarshal makes them; json.Unmarshal would refuse the
// whole document for one number out of range.
func parseDocument(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("more follows the first JSON value")
	}
	return toFloats(doc), nil
}

// toFloats replaces the numbers of a document decoded with UseNumber.
func toFloats(v any) any {
	switch v := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return outOfRange(v)
		}
		return f
	case map[string]any:
		for k, x := range v {
			v[k] = toFloats(x)
		}
	case []any:
		for i, x := range v {
			v[i] = toFloats(x)
		}
	}
	return v
}

// jsonNumber is the one number a JSONPath selected.
func jsonNumber(found []any) (float64, error) {
	if len(found) != 1 {
		return 0, fmt.Errorf("selects %d values, want exactly one number", len(found))
	}
	switch v := found[0].(type) {
	case float64:
		return v, nil
	case outOfRange:
		return 0, fmt.Errorf("selects %s, a number out of range: at most ±%.4g", Clip(string(v)), math.MaxFloat64)
	case string:
		if f, err := strconv.ParseFloat(v, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
			return f, nil
		}
	}
	return 0, fmt.Errorf("selects %s, not a number", Clip(fmt.Sprint(found[0])))
}

// head is the first lines of an output, for an error that must show what
// the program printed instead.
func head(b []byte) string {
	const lines = 5
	if len(bytes.TrimSpace(b)) == 0 {
		return "  (no output)"
	}
	parts := strings.SplitN(string(b), "\n", lines+1)
	if len(parts) > lines {
		parts = append(parts[:lines], "…")
	}
	for i, l := range parts {
		parts[i] = "  " + Clip(l)
	}
	return strings.Join(parts, "\n")
}
