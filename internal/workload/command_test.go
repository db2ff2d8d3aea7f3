package workload

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

func commandParams(argv, metrics string, more ...string) Params {
	p := mustLookupCommand().Defaults()
	p["argv"], p["metrics"] = argv, metrics
	for i := 0; i+1 < len(more); i += 2 {
		p[more[i]] = more[i+1]
	}
	return p
}

func mustLookupCommand() Workload {
	w, err := Lookup("command")
	if err != nil {
		panic(err)
	}
	return w
}

const scoreMetric = `[{"name":"score","unit":"score","better":"higher","regex":"Score:\\s*([0-9.]+)"}]`

func TestCommandSubstitutesTheDurationAndStops(t *testing.T) {
	w := mustLookupCommand()
	ex, err := w.Command(commandParams(`["load","--seconds={duration}","{duration}x"]`, scoreMetric), 2500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"load", "--seconds=3", "3x"}; !reflect.DeepEqual(ex.Argv, want) || ex.StopAfter != 0 || ex.Timeout <= 3*time.Second {
		t.Errorf("exit policy: %+v", ex)
	}
	ex, err = w.Command(commandParams(`["yes"]`, scoreMetric, "stop", StopDuration, "timeout", "90s", "workdir", "/opt/bench"), 5*time.Second)
	if err != nil || ex.StopAfter != 5*time.Second || ex.Timeout != 90*time.Second || ex.WorkDir != "/opt/bench" {
		t.Errorf("duration policy: %+v %v", ex, err)
	}
}

// Every mistake names the parameter and the place inside it, so the
// scenario can point at the very line.
func TestCommandValidation(t *testing.T) {
	w := mustLookupCommand()
	for _, tc := range []struct {
		argv, metrics string
		more          []string
		field, msg    string
	}{
		{"", scoreMetric, nil, "argv", "missing"},
		{`"sysbench cpu run"`, scoreMetric, nil, "argv", "no shell"},
		{`[]`, scoreMetric, nil, "argv", "non-empty list"},
		{`[""]`, scoreMetric, nil, "argv[0]", "empty"},
		{`["x"]`, "", nil, "metrics", "missing"},
		{`["x"]`, `[{"name":"a","unit":"u","better":"higher","regex":"a(1)","colour":"red"}]`, nil, "metrics[0]", `unknown field "colour"`},
		{`["x"]`, `[{"name":"A b","unit":"u","better":"higher","regex":"(1)"}]`, nil, "metrics[0].name", "lower-case"},
		{`["x"]`, `[{"name":"a","better":"higher","regex":"(1)"}]`, nil, "metrics[0].unit", "unit"},
		{`["x"]`, `[{"name":"a","unit":"u","better":"more","regex":"(1)"}]`, nil, "metrics[0].better", "higher or lower"},
		{`["x"]`, `[{"name":"a","unit":"u","better":"lower"}]`, nil, "metrics[0]", "exactly one of regex"},
		{`["x"]`, `[{"name":"a","unit":"u","better":"lower","regex":"(","json":"$.a"}]`, nil, "metrics[0]", "exactly one"},
		{`["x"]`, `[{"name":"a","unit":"u","better":"lower","regex":"(a"}]`, nil, "metrics[0].regex", "not a regular expression"},
		{`["x"]`, `[{"name":"a","unit":"u","better":"lower","regex":"Score [0-9]+"}]`, nil, "metrics[0].regex", "no group"},
		{`["x"]`, `[{"name":"a","unit":"u","better":"lower","json":"$.[["}]`, nil, "metrics[0].json", "not a JSONPath"},
		{`["x"]`, `[{"name":"a","unit":"u","better":"lower","json":"$.a"},{"name":"a","unit":"u","better":"lower","json":"$.b"}]`, nil, "metrics[1].name", "already"},
		{`["x"]`, scoreMetric, []string{"timeout", "soon"}, "timeout", "duration"},
		// The agent counts whole milliseconds: less would be no timeout at all.
		{`["x"]`, scoreMetric, []string{"timeout", "500us"}, "timeout", "from 1ms to 24h"},
		{`["x"]`, scoreMetric, []string{"workdir", "bench"}, "workdir", "absolute"},
	} {
		err := w.Validate(commandParams(tc.argv, tc.metrics, tc.more...))
		var pe *ParamError
		if !errors.As(err, &pe) || !errors.Is(err, ErrBadParam) || pe.Field() != tc.field || !strings.Contains(pe.Msg, tc.msg) {
			t.Errorf("argv %s metrics %s %v: err = %v, want %s: …%s…", tc.argv, tc.metrics, tc.more, err, tc.field, tc.msg)
		}
	}
	if err := w.Validate(commandParams(`["x"]`, scoreMetric, "stop", "never")); !errors.Is(err, ErrBadParam) {
		t.Errorf("stop never: %v", err)
	}
}

// No match is a clear error that shows what the program printed instead;
// a value must be one number.
func TestCommandParseIsStrict(t *testing.T) {
	w := mustLookupCommand().(ParamsParser)
	out := []byte("starting\nline 2\nline 3\nline 4\nline 5\nline 6\n")
	_, err := w.ParseParams(commandParams(`["x"]`, scoreMetric), out, nil)
	if !errors.Is(err, ErrParse) || !strings.Contains(err.Error(), "matches nothing in the output, which begins:\n  starting\n  line 2") ||
		strings.Contains(err.Error(), "line 6") {
		t.Errorf("no match: %v", err)
	}
	_, err = w.ParseParams(commandParams(`["x"]`, scoreMetric), nil, nil)
	if !errors.Is(err, ErrParse) || !strings.Contains(err.Error(), "(no output)") {
		t.Errorf("empty output: %v", err)
	}
	_, err = w.ParseParams(commandParams(`["x"]`, `[{"name":"a","unit":"u","better":"lower","regex":"Score: (\\S+)"}]`), []byte("Score: n/a\n"), nil)
	if !errors.Is(err, ErrParse) || !strings.Contains(err.Error(), `"n/a", which is not a number`) {
		t.Errorf("not a number: %v", err)
	}
	jsonMetric := func(path string) Params {
		return commandParams(`["x"]`, `[{"name":"a","unit":"u","better":"lower","json":"`+path+`"}]`)
	}
	doc := []byte(`{"runs":[{"lat":1.5},{"lat":"2.5"},{"lat":true}]}`)
	for path, want := range map[string]string{
		"$.runs[0].lat": "", "$.runs[1].lat": "", "$.runs[*].lat": "selects 3 values", "$.nothing": "selects 0 values", "$.runs[2].lat": "not a number",
	} {
		samples, err := w.ParseParams(jsonMetric(path), doc, nil)
		if want == "" && (err != nil || len(samples) != 1 || samples[0].Value <= 0 || samples[0].Better != LowerIsBetter) {
			t.Errorf("%s: %v %+v", path, err, samples)
		}
		if want != "" && (!errors.Is(err, ErrParse) || !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: err = %v, want %q", path, err, want)
		}
	}
	_, err = w.ParseParams(jsonMetric("$.a"), []byte("result: {\"a\": 1}"), nil)
	if !errors.Is(err, ErrParse) || !strings.Contains(err.Error(), "not one JSON document") {
		t.Errorf("not JSON: %v", err)
	}
}

// A number beyond a float64 (1e999) fails the metric that selects it,
// saying so; the document and its other metrics are read.
func TestCommandNumberOutOfRangeFailsItsMetricAlone(t *testing.T) {
	w := mustLookupCommand().(ParamsParser)
	p := commandParams(`["x"]`, `[{"name":"a","unit":"u","better":"lower","json":"$.a"},{"name":"b","unit":"u","better":"lower","json":"$.b"},`+
		`{"name":"c","unit":"u","better":"lower","json":"$.c[0]"}]`)
	samples, err := w.ParseParams(p, []byte(`{"a": 1e999, "b": 2, "c": [-1e400]}`), nil)
	if len(samples) != 1 || samples[0].Metric != "b" || samples[0].Value != 2 {
		t.Errorf("samples = %+v, want b alone", samples)
	}
	for _, want := range []string{"metric a: $.a selects 1e999, a number out of range", "metric c: $.c[0] selects -1e400, a number out of range"} {
		if !errors.Is(err, ErrParse) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "JSON document") {
			t.Errorf("err = %v, want %q", err, want)
		}
	}
	_, err = w.ParseParams(p, []byte(`{"b": 2} {"b": 3}`), nil)
	if err == nil || strings.Count(err.Error(), "not one JSON document") != 3 || strings.Count(err.Error(), `{"b": 2} {"b": 3}`) != 1 {
		t.Errorf("two documents: %v; want each metric failed, the output quoted once", err)
	}
}

// A net-command's server runs on the other side on the guest's own port;
// its client, pre and post get the peer's address, the port and the
// duration; its parameters are checked like command's.
func TestNetCommand(t *testing.T) {
	w := mustLookup(t, "net-command")
	nw, ok := w.(Networked)
	if !ok {
		t.Fatal("net-command is not a network workload")
	}
	p := merge(w.Defaults(), iperf3JSONParams)
	p["pre"], p["post"] = `["sh","-c","echo {port} > /tmp/pre"]`, `["cat","/tmp/pre"]`
	if err := w.Validate(p); err != nil {
		t.Fatal(err)
	}
	servers := nw.Servers(p, Listen{Port: 5200})
	if len(servers) != 1 || servers[0].Port != 5204 || servers[0].Proto != "tcp" || strings.Join(servers[0].Argv, " ") != "iperf3 -s -p 5204" {
		t.Errorf("servers = %+v", servers)
	}
	if again := nw.Servers(p, Listen{Port: 5208}); again[0].Name != servers[0].Name {
		t.Errorf("one server command, two names: %q %q", servers[0].Name, again[0].Name)
	}
	ne, err := nw.NetCommand(p, 3*time.Second, Peer{Addr: netip.MustParseAddr("198.18.0.1"), Port: 5200})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ne.Argv, " "); got != "iperf3 -c 198.18.0.1 -p 5204 -t 3 -J" {
		t.Errorf("client argv = %q", got)
	}
	if len(ne.ServerPre) != 1 || ne.ServerPre[0].Argv[2] != "echo 5204 > /tmp/pre" || len(ne.ServerPost) != 1 || ne.ServerPost[0].Argv[0] != "cat" {
		t.Errorf("pre %+v, post %+v", ne.ServerPre, ne.ServerPost)
	}
	if _, err := w.Command(p, time.Second); !errors.Is(err, ErrNeedsNetwork) {
		t.Errorf("Command without a network: %v", err)
	}
	delete(p, "server")
	if s := nw.Servers(merge(p, Params{"server": ""}), Listen{Port: 5200}); len(s) != 0 {
		t.Errorf("servers without a server command: %+v", s)
	}
	for key, bad := range map[string]string{"server": `[""]`, "pre": `"sh"`, "proto": "sctp", ParamClient: "both"} {
		q := merge(w.Defaults(), iperf3JSONParams)
		q[key] = bad
		if err := w.Validate(q); !errors.Is(err, ErrBadParam) || !strings.Contains(err.Error(), key) {
			t.Errorf("%s = %s: %v", key, bad, err)
		}
	}
}
