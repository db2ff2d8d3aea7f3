package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/vfleet/vfleet/internal/runner"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/testutil"
)

// recordingObserver writes down the events it gets, one line each; the
// test calls it from one goroutine.
type recordingObserver struct {
	name   string
	events *[]string
}

func (r recordingObserver) log(s string)               { *r.events = append(*r.events, r.name+" "+s) }
func (r recordingObserver) RunStarted(runner.RunEvent) { r.log("run") }
func (r recordingObserver) GuestStarting(runner.GuestEvent) func(runner.GuestEvent, error) {
	r.log("guest")
	return func(runner.GuestEvent, error) { r.log("guest done") }
}
func (r recordingObserver) StepStarted(runner.StepEvent) func(error) {
	r.log("step")
	return func(error) { r.log("step done") }
}
func (r recordingObserver) SamplesStored(int64, []store.Sample) { r.log("samples") }
func (r recordingObserver) TeardownStarted(int64) func(error) {
	r.log("teardown")
	return func(error) { r.log("teardown done") }
}
func (r recordingObserver) GuestStopped(runner.GuestEvent, error) { r.log("stopped") }
func (r recordingObserver) RunFinished(int64, string)             { r.log("finished") }

func TestFanOutPassesEveryEventToEach(t *testing.T) {
	var events []string
	f := fanOut{recordingObserver{name: "a", events: &events}, recordingObserver{name: "b", events: &events}}
	f.RunStarted(runner.RunEvent{})
	f.GuestStarting(runner.GuestEvent{})(runner.GuestEvent{}, nil)
	f.StepStarted(runner.StepEvent{})(nil)
	f.SamplesStored(1, nil)
	f.TeardownStarted(1)(nil)
	f.GuestStopped(runner.GuestEvent{}, nil)
	f.RunFinished(1, "complete")
	want := "a run,b run,a guest,b guest,a guest done,b guest done,a step,b step,a step done,b step done,a samples,b samples," +
		"a teardown,b teardown,a teardown done,b teardown done,a stopped,b stopped,a finished,b finished"
	if got := strings.Join(events, ","); got != want {
		t.Fatalf("events\n%s\nwant\n%s", got, want)
	}
}

// watchStderr reads a command's stderr, keeping every line and signalling
// the first line matching each pattern with its submatch.
type watchStderr struct {
	mu    sync.Mutex
	lines []string
}

func (w *watchStderr) start(t *testing.T, pipe io.Reader, patterns map[string]chan string) {
	t.Helper()
	res := map[*regexp.Regexp]chan string{}
	for p, ch := range patterns {
		res[regexp.MustCompile(p)] = ch
	}
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			w.mu.Lock()
			w.lines = append(w.lines, sc.Text())
			w.mu.Unlock()
			for re, ch := range res {
				if m := re.FindStringSubmatch(sc.Text()); m != nil {
					ch <- m[len(m)-1]
					delete(res, re)
				}
			}
		}
	}()
}

func (w *watchStderr) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.lines, "\n")
}

func await(t *testing.T, ch chan string, what string, w *watchStderr) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(2 * time.Minute):
		t.Fatalf("never saw %s; stderr:\n%s", what, w)
		return ""
	}
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

func stopWith(t *testing.T, cmd *exec.Cmd, sig syscall.Signal) error {
	t.Helper()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatal("vfleet did not exit within a minute of the signal")
		return nil
	}
}

func TestServeScrapesTheStoreUntilInterrupted(t *testing.T) {
	c := newCLI(t)
	st, err := store.Open(c.db)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id, err := st.CreateRun(ctx, &store.Run{ScenarioName: "served", ScenarioText: []byte("name: served\n"), Started: time.Now()})
	if err == nil {
		err = st.AddSamples(ctx, id, []store.Sample{{RunID: id, Guest: "host", Group: "host", WorkloadID: "cpu", Metric: "events_per_second", Unit: "1/s", Value: 1234, At: time.Now()}})
	}
	if err == nil {
		err = st.FinishRun(ctx, id, store.StatusComplete, "", time.Now())
	}
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	cmd, w, a := startServe(t, c, "127.0.0.1:0")
	body := scrape(t, a)
	for _, want := range []string{`vfleet_store_runs{status="complete"} 1`, `vfleet_run_samples_total{run="1",scenario="served"} 1`,
		`vfleet_sample_value{group="host",guest="host",metric="events_per_second",run="1",unit="1/s",workload="cpu"} 1234`} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %s:\n%s", want, body)
		}
	}
	if err := stopWith(t, cmd, syscall.SIGINT); err != nil {
		t.Fatalf("serve after Ctrl-C: %v\n%s", err, w)
	}
}

// otlpReceiver keeps the spans exported to it over OTLP/HTTP.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, err := io.ReadAll(req.Body)
	var msg coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(b, &msg)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range msg.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			r.spans = append(r.spans, ss.GetSpans()...)
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func TestInterruptedRunIsScrapedAndItsTraceFlushed(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.Image(t)
	before := testutil.TakeSnapshot(t)
	defer testutil.CheckLeaks(t, before)
	rcv := &otlpReceiver{}
	collector := httptest.NewServer(rcv)
	defer collector.Close()

	c := newCLI(t)
	scenario := c.scenario(`name: observed
repetitions: 5
warmup: 0
duration: 1s
guests:
  - {name: host, kind: host}
workloads:
  - workload: cpu
`)
	cmd := c.command("run", scenario, "--html", "-", "--metrics-addr", "127.0.0.1:0", "--otlp-endpoint", collector.URL)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var w watchStderr
	addr, measured := make(chan string, 1), make(chan string, 1)
	w.start(t, pipe, map[string]chan string{`metrics at http://(\S+)/metrics`: addr, `cpu on host \(rep 1\) (ok)`: measured})
	a := await(t, addr, "the metrics address", &w)
	await(t, measured, "the first step", &w)
	body := scrape(t, a)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`vfleet_run_steps_total\{run="\d+",scenario="observed"\} 5`),
		regexp.MustCompile(`vfleet_run_steps_done_total\{run="\d+",scenario="observed"\} [1-5]`),
		regexp.MustCompile(`vfleet_guest_up\{group="host",guest="host",kind="host",run="\d+",runtime=""\} 1`),
		regexp.MustCompile(`vfleet_guest_cpu_seconds_total\{group="host",guest="host",kind="host",run="\d+",runtime=""\} [0-9.e+]+`),
		regexp.MustCompile(`vfleet_sample_value\{group="host",guest="host",metric="events_per_sec",[^}]*workload="cpu"\} [0-9.e+]+`),
	} {
		if !want.MatchString(body) {
			t.Errorf("scrape lacks %s:\n%s", want, body)
		}
	}
	err = stopWith(t, cmd, syscall.SIGINT)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
		t.Fatalf("interrupted run: %v, want exit %d\n%s", err, exitInterrupted, &w)
	}
	// Everything was flushed before vfleet exited: no waiting here.
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	names := map[string]int{}
	for _, s := range rcv.spans {
		names[s.GetName()]++
		if s.GetName() == "run" && s.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR {
			t.Errorf("interrupted run's span has status %v", s.GetStatus())
		}
	}
	if names["run"] != 1 || names["guest.start"] != 1 || names["teardown"] != 1 || names["step"] < 1 {
		t.Errorf("spans received %v, want run, guest.start, teardown once and steps", names)
	}
}

// startServe starts `vfleet serve` and returns once it says where it
// serves, with its stderr as it goes.
func startServe(t *testing.T, c *cli, listen string) (*exec.Cmd, *watchStderr, string) {
	t.Helper()
	cmd := c.command("serve", "--metrics-addr", listen)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &watchStderr{}
	serving := make(chan string, 1)
	w.start(t, pipe, map[string]chan string{`at http://(\S+)/metrics`: serving})
	return cmd, w, await(t, serving, "the serving address", w)
}
