package workload

import (
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func FuzzParseCPU(f *testing.F)           { fuzzParse(f, "cpu") }
func FuzzParseMemory(f *testing.F)        { fuzzParse(f, "memory") }
func FuzzParseCtxswitch(f *testing.F)     { fuzzParse(f, "ctxswitch") }
func FuzzParseSyscall(f *testing.F)       { fuzzParse(f, "syscall") }
func FuzzParseStream(f *testing.F)        { fuzzParse(f, "stream") }
func FuzzParsePingpong(f *testing.F)      { fuzzParse(f, "ctxswitch-pinned") }
func FuzzParseCachebench(f *testing.F)    { fuzzParse(f, "cachebench") }
func FuzzParseLame(f *testing.F)          { fuzzParse(f, "lame") }
func FuzzParseFio(f *testing.F)           { fuzzParse(f, "fio") }
func FuzzParseNetThroughput(f *testing.F) { fuzzParse(f, "net-throughput") }
func FuzzParseNetLatency(f *testing.F)    { fuzzParse(f, "net-latency") }
func FuzzParseTimerLatency(f *testing.F)  { fuzzParse(f, "timer-latency") }
func FuzzParseTimerlat(f *testing.F)      { fuzzParse(f, "timerlat") }
func FuzzParseOsnoise(f *testing.F)       { fuzzParse(f, "osnoise") }
func FuzzParseCommand(f *testing.F)       { fuzzParse(f, "command") }
func FuzzParseNetCommand(f *testing.F)    { fuzzParse(f, "net-command") }

// fuzzParams are the parameters a workload whose parsing depends on them
// is fuzzed with; the others use their defaults.
var fuzzParams = map[string]Params{"command": unixbenchParams, "net-command": iperf3JSONParams}

// maxFuzzSeed bounds a recording used whole as a seed. The full logs and
// histograms run to megabytes, which would slow every execution derived
// from them a hundredfold; their first maxFuzzSeed bytes still teach the
// fuzzer their shape, and the small complete outputs under
// testdata/fuzz/ the way through.
const maxFuzzSeed = 16 << 10

// fuzzParse fuzzes the parser of the named workload, seeded with every
// recording of its tool. Whatever the output, Parse must not panic, and
// what it accepts must be usable: finite values, a unit and a direction
// for every sample, and a histogram behind a sample only when it holds
// observations.
func fuzzParse(f *testing.F, name string) {
	w, err := Lookup(name)
	if err != nil {
		f.Fatal(err)
	}
	params, ok := fuzzParams[name]
	if !ok {
		params = w.Defaults()
	}
	// A command is any program: every recording seeds it.
	tool := ""
	if progs := w.Programs(); len(progs) > 0 {
		tool = progs[0].Name
	}
	stderrs, err := filepath.Glob(filepath.Join("testdata", tool+"*-*.stderr"))
	if err != nil || len(stderrs) == 0 {
		f.Fatalf("no recording of %s under testdata (%v)", tool, err)
	}
	for _, path := range stderrs {
		stderr, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		stdout, err := readRecording(strings.TrimSuffix(path, ".stderr") + ".stdout")
		if err != nil {
			f.Fatal(err)
		}
		if len(stdout) > maxFuzzSeed {
			stdout = stdout[:maxFuzzSeed]
		}
		f.Add(stdout, stderr)
	}
	f.Fuzz(func(t *testing.T, stdout, stderr []byte) {
		samples, err := ParseOutput(w, params, stdout, stderr)
		if err != nil {
			return
		}
		if len(samples) == 0 {
			t.Fatal("no samples and no error")
		}
		for _, s := range samples {
			if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) || s.Metric == "" || s.Unit == "" ||
				(s.Better != HigherIsBetter && s.Better != LowerIsBetter) {
				t.Fatalf("accepted sample %+v", s)
			}
			if s.Hist != nil && (s.Hist.Count() == 0 || s.Hist.Invalid() > 0) {
				t.Fatalf("sample %s: histogram of %d observations, %d invalid", s.Metric, s.Hist.Count(), s.Hist.Invalid())
			}
		}
	})
}

// A new workload's parser must be fuzzed too: every registered workload
// needs its own FuzzParse target calling fuzzParse.
func TestEveryParserIsFuzzed(t *testing.T) {
	file, err := parser.ParseFile(token.NewFileSet(), "fuzz_test.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var fuzzed []string
	ast.Inspect(file, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) != 2 {
			return true
		}
		if fn, ok := call.Fun.(*ast.Ident); !ok || fn.Name != "fuzzParse" {
			return true
		}
		if lit, ok := call.Args[1].(*ast.BasicLit); ok {
			name, _ := strconv.Unquote(lit.Value)
			fuzzed = append(fuzzed, name)
		}
		return true
	})
	slices.Sort(fuzzed)
	if got, want := fuzzed, Names(); !slices.Equal(got, want) {
		t.Errorf("fuzzed parsers %v, registered workloads %v", got, want)
	}
}
