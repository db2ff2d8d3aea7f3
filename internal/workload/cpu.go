package workload

import (
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/vfleet/vfleet/internal/workload/programs"
)

// cpu measures CPU throughput with sysbench's prime-number test: events per
// second, where an event is one verification of the primes up to max_prime.
type cpu struct{}

func init() { Register(cpu{}) }

func (cpu) Name() string { return "cpu" }
func (cpu) Programs() []Program {
	return []Program{programs.Sysbench}
}

func (cpu) Defaults() Params { return Params{"threads": "1", "max_prime": "10000"} }

func (w cpu) Validate(p Params) error {
	if err := checkKeys(w, p); err != nil {
		return err
	}
	if _, err := intParam(p, "threads", 1, 1024); err != nil {
		return err
	}
	_, err := intParam(p, "max_prime", 3, 10_000_000)
	return err
}

func (w cpu) Command(p Params, d time.Duration) (Exec, error) {
	if err := w.Validate(p); err != nil {
		return Exec{}, err
	}
	return Exec{
		Argv: []string{"sysbench", "cpu",
			"--threads=" + p["threads"], "--cpu-max-prime=" + p["max_prime"],
			fmt.Sprintf("--time=%d", seconds(d)), "run"},
		Timeout: timeoutFor(d),
	}, nil
}

var sysbenchEventsRE = regexp.MustCompile(`(?m)^\s*events per second:\s+([0-9.]+)\s*$`)

func (cpu) Parse(stdout, _ []byte) ([]Sample, error) {
	m := sysbenchEventsRE.FindSubmatch(stdout)
	if m == nil {
		return nil, fmt.Errorf("%w: sysbench cpu: no \"events per second\" line in: %s", ErrParse, excerpt(stdout))
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		return nil, fmt.Errorf("%w: sysbench cpu: %v", ErrParse, err)
	}
	return []Sample{{Metric: "events_per_sec", Unit: "events/s", Value: v, Better: HigherIsBetter}}, nil
}
