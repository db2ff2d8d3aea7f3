package stats

import (
	"encoding/json"
	"math"
	"testing"
)

// A figure JSON cannot carry is null, and non_finite says what it was;
// a summary of finite figures is written as before, without the member.
func TestMarshalFiniteNamesWhatIsNull(t *testing.T) {
	s := Summary{N: 3, Mean: math.NaN(), Median: 2, Stddev: math.Inf(1), Min: math.Inf(-1), Max: 4, CILow: 1, CIHigh: 3, Confidence: 0.95}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"n":3,"mean":null,"median":2,"stddev":null,"min":null,"max":4,"ci_low":1,"ci_high":3,"confidence":0.95,` +
		`"non_finite":{"mean":"NaN","min":"-Inf","stddev":"+Inf"}}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	type plain Summary
	finite := Summary{N: 1, Mean: 1, Median: 1, Min: 1, Max: 1, CILow: 1, CIHigh: 1, Confidence: 0.95}
	got, err := json.Marshal(finite)
	if err != nil {
		t.Fatal(err)
	}
	if std, _ := json.Marshal(plain(finite)); string(got) != string(std) {
		t.Errorf("a finite summary: got %s, encoding/json gives %s", got, std)
	}
	var back Summary
	if err := json.Unmarshal(b, &back); err != nil || back.Median != 2 || back.Max != 4 {
		t.Errorf("read back: %+v, %v", back, err)
	}
}

// omitempty is honoured as encoding/json honours it.
func TestMarshalFiniteOmitsEmpty(t *testing.T) {
	type row struct {
		Name  string   `json:"name,omitempty"`
		List  []int    `json:"list,omitempty"`
		Inner Estimate `json:"inner,omitempty"`
		P     float64  `json:"p"`
		skip  int
	}
	b, err := MarshalFinite(row{P: math.NaN(), skip: 1, Inner: Estimate{Value: math.Inf(1)}})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"inner":{"value":null,"low":0,"high":0,"non_finite":{"value":"+Inf"}},"p":null,"non_finite":{"p":"NaN"}}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}
