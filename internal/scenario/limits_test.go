package scenario

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/workload"
)

func TestLoadRefusesWhatIsNotAScenarioFile(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(big, []byte("name: x\n"+strings.Repeat("# padding\n", MaxFileBytes/10+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	// Opening a named pipe for reading waits for a writer: Load must not.
	fifo := filepath.Join(t.TempDir(), "f.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ ref, want string }{
		{strings.Repeat("d/", 3000), "file name too long"}, // and its error quotes it clipped
		{filepath.Join(t.TempDir(), strings.Repeat("n", 250)), "no such file, and no built-in scenario of that name"},
		{fifo, "scenario " + workload.Clip(fifo) + " is a named pipe, not a regular file: give a YAML file"},
		{os.DevNull, "is a character device"},
		{"/dev/zero", "is a character device"},
		{t.TempDir(), "is a directory"},
		{big, "over 1024 KiB"},
	} {
		began := time.Now()
		_, err := Load(tc.ref, opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) || len(err.Error()) > 500 {
			t.Errorf("Load(%.100s): %.600v, want %q in under 500 bytes", tc.ref, err, tc.want)
		}
		if d := time.Since(began); d > 10*time.Second {
			t.Errorf("Load(%s) took %s", tc.ref, d)
		}
	}
}

func TestScenarioOverTheLimitsSaysHowManyItWouldMake(t *testing.T) {
	var groups strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&groups, "  - {name: g%d, kind: container, count: 4096}\n", i)
	}
	for _, tc := range []struct{ text, want string }{
		{"name: x\nguests:\n" + groups.String() + "  - {name: host, kind: host}\nworkloads:\n  - workload: " + testName + "\n",
			fmt.Sprintf("would start 4096001 guests; at most %d", MaxGuests)},
		{"name: x\nrepetitions: 1000000000\nguests:\n  - {name: host, kind: host}\n  - {kind: container, count: 100}\nworkloads:\n  - workload: " + testName + "\n",
			fmt.Sprintf("would have 101000000101 steps (workloads × repetitions and warm-ups × guests); at most %d", MaxSteps)},
	} {
		_, err := Parse("big.yaml", []byte(tc.text), opts)
		if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %.300v, want ErrTooLarge saying %q", err, tc.want)
		}
	}
}

func TestErrorsQuoteOnlyAPrefixOfAHugeValue(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	quoted := `"` + strings.Repeat("x", workload.MaxQuoted) + `…"`
	for _, tc := range []struct{ text, want string }{
		{"name: " + huge + "\nguests: [{kind: host}]\nworkloads: [{workload: " + testName + "}]\n", quoted},
		{"name: x\nguests: [{kind: " + huge + "}]\nworkloads: [{workload: " + testName + "}]\n", quoted},
		{"name: x\nguests: [{kind: host}]\nworkloads: [{workload: " + huge + "}]\n", quoted},
		{"name: x\nguests: [{kind: host}]\nworkloads: [{workload: " + testName + ", params: {mode: " + huge + "}}]\n", quoted},
		// A path is quoted in a sentence, and in the errors of what looked at it.
		{"name: x\nguests: [{kind: host}, {kind: vm, kernel: /" + huge[:6000] + "}]\nworkloads: [{workload: " + testName + "}]\n",
			" /" + strings.Repeat("x", workload.MaxQuoted-1) + "… "},
		{"name: x\nguests: [{kind: host}, {kind: container, image: /" + strings.Repeat("x/", 3000) + "}]\nworkloads: [{workload: " + testName + "}]\n",
			" " + strings.Repeat("/x", workload.MaxQuoted/2) + "… "},
	} {
		_, err := Parse("huge.yaml", []byte(tc.text), opts)
		if err == nil || len(err.Error()) > 1000 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error of %d bytes, want a clipped quote (%s) under 1000: %.200v", len(fmt.Sprint(err)), tc.want, err)
		}
	}
}

func TestClipValuesClipsTheUsersValuesOnly(t *testing.T) {
	long := strings.Repeat("y", 2*workload.MaxQuoted)
	clipped := long[:workload.MaxQuoted] + "…"
	allowed := strings.Repeat("allowed, ", 20) + "last"
	format := "%q is not %5.2f%% of %s (%d); %v; want one of %s"
	got := fmt.Sprintf(format, clipValues(format, []any{long, 1.5, "/dir/" + long + " here", 3, errors.New("open " + long + ": denied"), allowed})...)
	want := fmt.Sprintf("%q is not  1.50%% of %s here (3); open %s denied; want one of %s", clipped, ("/dir/" + long)[:workload.MaxQuoted]+"…", clipped, allowed)
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
