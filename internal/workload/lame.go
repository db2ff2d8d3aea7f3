package workload

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/vfleet/vfleet/internal/tools"
	"github.com/vfleet/vfleet/internal/workload/programs"
)

// lame is the time LAME takes to encode a fixed input to MP3, as the
// container study ran it (the Phoronix Test Suite's encode-mp3: `lame -h`
// over a WAV file, the output thrown away). Debian's LAME reads a WAV that
// vfleet's own vfleet-encode generates the same, byte for byte, in every
// guest, and times: a work of fixed size, so lower is better.
type lame struct{}

func init() {
	Register(lame{})
	// The workload's test runs Debian's lame on this host too, through
	// vfleet-encode built here, so a missing one says how to get it.
	tools.Register(tools.Spec{Name: programs.Lame.Name, Package: programs.Lame.Package,
		Banner: regexp.MustCompile(`(?m)^LAME (?:\d+bits )?version (\S+)`)})
}

// lameArgv is the encoder as the study ran it: LAME's high quality (-h),
// vfleet-encode adding the input and /dev/null as the output.
var lameArgv = []string{programs.Lame.Name, "-h"}

func (lame) Name() string { return "lame" }
func (lame) Programs() []Program {
	return []Program{{Name: "vfleet-encode"}, programs.Lame}
}

// Defaults: a minute of audio, which LAME encodes in one to two seconds
// on a current CPU.
func (lame) Defaults() Params { return Params{"audio_seconds": "60"} }

func (w lame) Validate(p Params) error {
	if err := checkKeys(w, p); err != nil {
		return err
	}
	_, err := intParam(p, "audio_seconds", 1, 3600)
	return err
}

// Command: the input's length, not the duration, sets the work; the time
// limit allows the encoder to be as slow as the audio is long (an
// emulated guest) on top of the usual one.
func (w lame) Command(p Params, d time.Duration) (Exec, error) {
	if err := w.Validate(p); err != nil {
		return Exec{}, err
	}
	audio, _ := strconv.Atoi(p["audio_seconds"])
	return Exec{
		Argv:    append([]string{"vfleet-encode", "--audio-seconds", p["audio_seconds"], "--"}, lameArgv...),
		Runs:    lameArgv[:1],
		Timeout: timeoutFor(d) + time.Duration(audio)*time.Second,
	}, nil
}

func (lame) Parse(stdout, stderr []byte) ([]Sample, error) {
	figures := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(stdout))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && (f[0] == "wall_seconds" || f[0] == "cpu_seconds") {
			v, err := parseFinite(f[1])
			if err != nil {
				return nil, fmt.Errorf("%w: vfleet-encode: %q: %v", ErrParse, sc.Text(), err)
			}
			figures[f[0]] = v
		}
	}
	if len(figures) != 2 {
		return nil, fmt.Errorf("%w: vfleet-encode reported no encoding time: %s", ErrParse, excerpt(bytes.Join([][]byte{stdout, stderr}, nil)))
	}
	return []Sample{
		{Metric: "encode_s", Unit: "s", Value: figures["wall_seconds"], Better: LowerIsBetter},
		{Metric: "encode_cpu_s", Unit: "s", Value: figures["cpu_seconds"], Better: LowerIsBetter},
	}, nil
}
