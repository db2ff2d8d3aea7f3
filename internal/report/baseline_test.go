package report

import (
	"bytes"
	"strings"
	"testing"
)

// A baseline of 5 repetitions is enough for a quiet metric, 3 not for one
// at 5% noise, and no baseline is for one at 20% against 40 repetitions
// of a run.
func TestBaselineShortfalls(t *testing.T) {
	quiet := abSamples(1, map[string][]float64{"events_per_sec": {100, 101, 99, 100.5, 99.5}})
	if short, n := BaselineShortfalls(quiet, DefaultCompareOptions); len(short) != 0 || n != 1 {
		t.Errorf("cv 1%%: %+v of %d", short, n)
	}
	samples := abSamples(1, map[string][]float64{"events_per_sec": {100, 105, 95}, "read_clat_p99": {50, 60, 40}})
	short, n := BaselineShortfalls(samples, DefaultCompareOptions)
	if len(short) != 2 || n != 2 || short[0].Needs <= 3 || short[1].Needs != 0 || short[0].Repetitions != 3 {
		t.Fatalf("%+v of %d", short, n)
	}
	one := abSamples(1, map[string][]float64{"events_per_sec": {100}})
	short1, _ := BaselineShortfalls(one, DefaultCompareOptions)
	var buf bytes.Buffer
	if err := WriteShortfalls(&buf, 7, n+1, append(short, short1...), DefaultCompareOptions); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"baseline run 7 is too small for 3 of its 3 metrics: against it a run of up to 40 repetitions would likely miss a 5% change",
		"container w events_per_sec (threads=1): cv 5%, 3 repetitions, needs ",
		"container w read_clat_p99 (threads=1): cv 20%, 3 repetitions, too noisy for any baseline at 40 repetitions of a run",
		"container w events_per_sec (threads=1): one value, no spread, 1 repetitions, needs 2 repetitions",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("want %q in:\n%s", want, buf.String())
		}
	}
}
