package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/workload"
)

// maxFuzzHist bounds the observations of the fuzzed histogram; its shape,
// not its size, is what the store could get wrong.
const maxFuzzHist = 16

// FuzzIntake stores a run, two samples (one with a histogram) and a
// failure made of fuzzed strings and numbers, and reads them back: what
// the store accepts it must return unchanged.
func FuzzIntake(f *testing.F) {
	// One database per fuzzing process: opening one is far slower than an
	// execution.
	s, err := Open(filepath.Join(f.TempDir(), "fuzz.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	// Durability is not under test, and a sync per transaction would make
	// the disk, not the store's code, the bound of the fuzzer's speed.
	if _, err := s.db.Exec(`PRAGMA synchronous = OFF`); err != nil {
		f.Fatal(err)
	}

	f.Add("default", []byte("name: default\n"), "host", "rw", "randread", 0, 123.45, int64(3e9), histBytes(87.5, 100, 2500.25), "exit status 1", "boom", int64(1795000000123456789))
	f.Add("", []byte{}, "", "", "", -1, math.NaN(), int64(-1), histBytes(math.NaN(), math.Inf(1), 0, -3), "", "", int64(0))
	f.Add("n\x00ul", []byte("\x00\xff"), "g\xffuest", "k\"ey", "v\\al\u2028", math.MaxInt, math.Inf(-1), int64(math.MinInt64), histBytes(math.MaxFloat64), "'); DROP TABLE runs; --", "\x1b[31mred\x1b[0m\r\n\xfe", int64(math.MaxInt64))
	f.Add("NaN", []byte("NaN"), "NaN", "NaN", "NaN", math.MinInt, math.Copysign(0, -1), int64(1), histBytes(math.Copysign(0, -1), 5e-324, 1e-300), "NaN", "NaN", int64(-1))
	f.Fuzz(func(t *testing.T, name string, text []byte, guest, key, value string, rep int, v float64, ns int64, hist []byte, errText, stderr string, atNS int64) {
		ctx := context.Background()
		at := timeOf(atNS)
		// The host, the guests, the parameters and the histogram are stored
		// as JSON, which holds valid UTF-8 only (json.Marshal replaces the
		// rest); everything else is stored as given.
		run := &Run{
			ScenarioName: name, ScenarioSource: "fuzz:" + name, ScenarioText: text, Baseline: guest, Started: at,
			Host: hostinfo.Fingerprint{Hostname: validUTF8(name), OnlineCPUs: rep, MemTotalKiB: ns,
				ToolVersions: map[string]string{validUTF8(key): validUTF8(value)}},
			Guests: map[string]GuestRecord{validUTF8(guest): {Group: validUTF8(guest), Kind: validUTF8(key), Memory: ns, BootNS: -ns,
				Details: map[string]string{validUTF8(value): validUTF8(stderr)}}},
		}
		id, err := s.CreateRun(ctx, run)
		if err != nil {
			t.Fatalf("CreateRun: %v", err)
		}
		defer forget(t, s, id)

		sample := Sample{RunID: id, Guest: guest, Group: guest, Kind: key, Runtime: value, WorkloadID: name, Workload: key,
			Params: workload.Params{validUTF8(key): validUTF8(value)}, Repetition: rep, Metric: name, Unit: value,
			Value: v, Better: workload.Better(key), At: at, WallNS: ns, CPUNS: atNS}
		withHist := sample
		withHist.Metric, withHist.Value, withHist.Hist = value, -v, histOf(validUTF8(value), hist)
		if err := s.AddSamples(ctx, id, []Sample{sample, withHist}); err != nil {
			t.Fatalf("AddSamples: %v", err)
		}
		failure := Failure{RunID: id, Guest: guest, Group: name, WorkloadID: key, Repetition: rep, Error: errText, Stderr: stderr, At: at}
		if err := s.AddFailure(ctx, failure); err != nil {
			t.Fatalf("AddFailure: %v", err)
		}

		got, err := s.GetRun(ctx, id)
		if err != nil {
			t.Fatalf("GetRun: %v", err)
		}
		if !bytes.Equal(got.ScenarioText, run.ScenarioText) {
			t.Fatalf("scenario text %q, stored %q", got.ScenarioText, run.ScenarioText)
		}
		got.ScenarioText = run.ScenarioText
		if !reflect.DeepEqual(got, *run) {
			t.Fatalf("run read back as\n%+v\nstored\n%+v", got, *run)
		}
		samples, err := s.Samples(ctx, id)
		if err != nil {
			t.Fatalf("Samples: %v", err)
		}
		if len(samples) != 2 || !sameSample(samples[0], sample) || !sameSample(samples[1], withHist) {
			t.Fatalf("samples read back as\n%+v\nstored\n%+v", samples, []Sample{sample, withHist})
		}
		failures, err := s.Failures(ctx, id)
		if err != nil {
			t.Fatalf("Failures: %v", err)
		}
		if len(failures) != 1 || !reflect.DeepEqual(failures[0], failure) {
			t.Fatalf("failures read back as\n%+v\nstored\n%+v", failures, failure)
		}
	})
}

// timeOf is the moment ns after the epoch as the store returns it, in
// UTC; 0 is the store's "not set".
func timeOf(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

func validUTF8(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// histBytes and histOf turn observations into fuzzer bytes and back, so
// the fuzzer can reach every float64, NaN and the infinities included.
func histBytes(values ...float64) []byte {
	b := make([]byte, 0, 8*len(values))
	for _, v := range values {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}

// histOf returns nil for fewer than 8 bytes: a sample without a histogram.
func histOf(unit string, b []byte) *stats.Histogram {
	if len(b) < 8 {
		return nil
	}
	h := stats.NewHistogram(unit)
	for i := 0; i+8 <= len(b) && i < 8*maxFuzzHist; i += 8 {
		v := math.Float64frombits(binary.LittleEndian.Uint64(b[i:]))
		h.Add(v)
	}
	return h
}

// sameSample is equality as the store defines it: a NaN value reads back
// as a NaN, and -0 as 0, which compares equal to it.
func sameSample(got, want Sample) bool {
	if got.Value != want.Value && !(math.IsNaN(got.Value) && math.IsNaN(want.Value)) {
		return false
	}
	got.Value, want.Value = 0, 0
	return reflect.DeepEqual(got, want)
}

// forget deletes the run, so the database of a long fuzzing session stays
// small and each execution as fast as the first.
func forget(t *testing.T, s *Store, id int64) {
	t.Helper()
	for _, table := range []string{"histograms", "samples", "failures", "runs"} {
		col := "run_id"
		if table == "runs" {
			col = "id"
		}
		if _, err := s.db.Exec(`DELETE FROM `+table+` WHERE `+col+` = ?`, id); err != nil {
			t.Fatalf("forget run %d: %v", id, err)
		}
	}
}
