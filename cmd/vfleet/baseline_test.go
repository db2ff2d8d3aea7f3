package main

import (
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/store"
)

// A regression check made for CI: `compare --baseline` exits 0 for an A/A,
// 8 when a metric got worse and 9 when a change is beyond the noise floor
// but too few repetitions were measured to test it.
func TestCompareBaselineExitStatuses(t *testing.T) {
	same := []float64{100, 101, 99, 100.5, 99.5}
	slower := []float64{70, 71, 69, 70.5, 69.5} // 30% slower
	c := storeRunsOf(t,
		storedRun{quickText, "lab1", store.StatusComplete, same},                                 // 1: the baseline
		storedRun{quickText, "lab1", store.StatusComplete, []float64{100.2, 99.8, 101, 99, 100}}, // 2: A/A
		storedRun{quickText, "lab1", store.StatusComplete, slower},                               // 3: worse
		storedRun{quickText, "lab1", store.StatusComplete, []float64{70, 71, 69}},                // 4: worse, 3 reps
		storedRun{quickText, "lab2", store.StatusComplete, same},                                 // 5: another machine
		storedRun{quickText, "lab1", store.StatusCompleteWithFailures, same},                     // 6
		storedRun{quickEdited, "lab1", store.StatusComplete, same},                               // 7: scenario edited
	)
	if _, stderr, code := c.run("compare", "--baseline", "2"); code != 1 || !strings.Contains(stderr, "scenario quick has no baseline on lab1: set one with 'vfleet baseline set RUN'") {
		t.Errorf("no baseline yet: exit %d: %s", code, stderr)
	}
	if _, stderr, code := c.run("baseline", "set", "6"); code != 1 || !strings.Contains(stderr, "run 6 is complete with failures") {
		t.Errorf("a run with failures as baseline: exit %d: %s", code, stderr)
	}
	if _, stderr, code := c.run("baseline", "set", "1"); code != 0 || !strings.Contains(stderr, "run 1 is the baseline of scenario quick on lab1") {
		t.Fatalf("baseline set 1: exit %d: %s", code, stderr)
	}
	if stdout, stderr, code := c.run("baseline", "show"); code != 0 || !strings.Contains(stdout, "quick") || !strings.Contains(stdout, "lab1") {
		t.Errorf("baseline show: exit %d: %s %s", code, stdout, stderr)
	}

	for _, tc := range []struct {
		args []string
		code int
		want string // on stdout and stderr together
	}{
		{[]string{"2"}, 0, "no significant difference"},
		{[]string{"3"}, exitWorse, "run 3: 1 of 1 metrics got worse than in baseline run 1"},
		{[]string{"4"}, exitUndecided, "undecided (too few repetitions)"},
		{[]string{"4"}, exitUndecided, "too few repetitions to tell (5 a side can)"},
		{[]string{"5"}, exitFailed, "scenario quick has no baseline on lab2"},
		{[]string{"1"}, exitUsage, "run 1 is the baseline of scenario quick itself"},
		{[]string{"7"}, 0, "scenario quick changed between run 1 and run 7"},
		{[]string{"2", "3"}, exitUsage, "--baseline takes one run"},
		{nil, 0, "run 7 against the baseline of scenario quick on lab1: run 1"}, // latest
		{[]string{"3", "--format", "json"}, exitWorse, `"verdict": "worse"`},
	} {
		stdout, stderr, code := c.run(append([]string{"compare", "--baseline"}, tc.args...)...)
		if code != tc.code || !strings.Contains(stdout+stderr, tc.want) {
			t.Errorf("compare --baseline %v: exit %d, want %d and %q:\n%s%s", tc.args, code, tc.code, tc.want, stdout, stderr)
		}
	}

	if _, stderr, code := c.run("baseline", "unset", "quick"); code != 1 || !strings.Contains(stderr, "scenario quick has no baseline on") {
		t.Errorf("unset on this machine, which has none: exit %d: %s", code, stderr)
	}
	if _, stderr, code := c.run("baseline", "unset", "quick", "--machine", "lab1"); code != 0 {
		t.Errorf("unset: exit %d: %s", code, stderr)
	}
	if _, _, code := c.run("compare", "--baseline", "3"); code != exitFailed {
		t.Errorf("compare after unset: exit %d, want %d", code, exitFailed)
	}
}
