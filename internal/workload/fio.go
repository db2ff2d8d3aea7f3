package workload

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/vfleet/vfleet/internal/workload/programs"
)

// fio measures file I/O on the guest's own filesystem (its copy-on-write
// layer): a file in the working directory, removed afterwards.
type fio struct{}

func init() { Register(fio{}) }

func (fio) Name() string { return "fio" }
func (fio) Programs() []Program {
	return []Program{programs.Fio}
}

func (fio) Defaults() Params {
	return Params{"rw": "randread", "bs": "4k", "size": "128M", "direct": "1", "ioengine": "psync", "iodepth": "1"}
}

var fioModes = []string{"randread", "randwrite", "read", "write"}

const (
	fioMaxBlock = 256 << 20
	fioMaxFile  = 1 << 40
)

func (w fio) Validate(p Params) error {
	if err := checkKeys(w, p); err != nil {
		return err
	}
	if _, err := enumParam(p, "rw", fioModes...); err != nil {
		return err
	}
	// fio holds bs × iodepth in memory; size is the file it lays out in
	// the guest's own layer.
	bs, err := sizeParam(p, "bs", fioMaxBlock)
	if err != nil {
		return err
	}
	size, err := sizeParam(p, "size", fioMaxFile)
	if err != nil {
		return err
	}
	if bs > size {
		return fmt.Errorf("%w: bs = %s is larger than size = %s: a block must fit in the file", ErrBadParam, p["bs"], p["size"])
	}
	direct, err := enumParam(p, "direct", "0", "1")
	if err != nil {
		return err
	}
	if direct == "1" && bs%512 != 0 {
		return fmt.Errorf("%w: bs = %s: direct I/O needs a multiple of 512 bytes (or direct: \"0\")", ErrBadParam, p["bs"])
	}
	if _, err := enumParam(p, "ioengine", "psync", "sync", "libaio", "io_uring"); err != nil {
		return err
	}
	_, err = intParam(p, "iodepth", 1, 1024)
	return err
}

func (w fio) Command(p Params, d time.Duration) (Exec, error) {
	if err := w.Validate(p); err != nil {
		return Exec{}, err
	}
	return Exec{
		Argv: []string{"fio", "--name=vfleet-" + p["rw"], "--filename=vfleet-fio.dat",
			"--rw=" + p["rw"], "--bs=" + p["bs"], "--size=" + p["size"], "--direct=" + p["direct"],
			"--ioengine=" + p["ioengine"], "--iodepth=" + p["iodepth"],
			"--time_based", fmt.Sprintf("--runtime=%d", seconds(d)), "--unlink=1", "--output-format=json"},
		Timeout: timeoutFor(d),
	}, nil
}

// fioOutput is the part of fio's JSON output vfleet reads.
type fioOutput struct {
	Jobs []struct {
		Error int       `json:"error"`
		Read  fioResult `json:"read"`
		Write fioResult `json:"write"`
	} `json:"jobs"`
}

type fioResult struct {
	IOPS    float64 `json:"iops"`
	BWKiB   float64 `json:"bw"` // KiB/s
	TotalIO int64   `json:"total_ios"`
	LatNS   struct {
		Mean float64 `json:"mean"`
	} `json:"lat_ns"`
	ClatNS struct {
		Percentile map[string]float64 `json:"percentile"`
	} `json:"clat_ns"`
}

func (fio) Parse(stdout, stderr []byte) ([]Sample, error) {
	var out fioOutput
	if err := json.Unmarshal(stdout, &out); err != nil {
		return nil, fmt.Errorf("%w: fio: output is not JSON (%v): %s", ErrParse, err, excerpt(append(stdout, stderr...)))
	}
	if len(out.Jobs) != 1 {
		return nil, fmt.Errorf("%w: fio: want 1 job in the output, got %d", ErrParse, len(out.Jobs))
	}
	job := out.Jobs[0]
	if job.Error != 0 {
		return nil, fmt.Errorf("%w: fio job failed with error %d: %s", ErrParse, job.Error, excerpt(stderr))
	}
	var samples []Sample
	for _, dir := range []struct {
		name string
		r    fioResult
	}{{"read", job.Read}, {"write", job.Write}} {
		if dir.r.TotalIO == 0 {
			continue
		}
		p99, ok := dir.r.ClatNS.Percentile["99.000000"]
		if !ok {
			return nil, fmt.Errorf("%w: fio: no 99th percentile of %s completion latency", ErrParse, dir.name)
		}
		samples = append(samples,
			Sample{Metric: dir.name + "_iops", Unit: "IOPS", Value: dir.r.IOPS, Better: HigherIsBetter},
			Sample{Metric: dir.name + "_bw", Unit: "MiB/s", Value: dir.r.BWKiB / 1024, Better: HigherIsBetter},
			Sample{Metric: dir.name + "_lat_mean", Unit: "us", Value: dir.r.LatNS.Mean / 1000, Better: LowerIsBetter},
			Sample{Metric: dir.name + "_clat_p99", Unit: "us", Value: p99 / 1000, Better: LowerIsBetter},
		)
	}
	if len(samples) == 0 {
		return nil, fmt.Errorf("%w: fio: the job did no I/O", ErrParse)
	}
	return samples, nil
}
