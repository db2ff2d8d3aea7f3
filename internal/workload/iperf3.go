package workload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"time"

	"github.com/vfleet/vfleet/internal/workload/programs"
)

// netThroughput measures bulk throughput between a guest and the peer with
// iperf3: the client runs in the guest, the server on the peer.
type netThroughput struct{}

func init() { Register(netThroughput{}) }

func (netThroughput) Name() string { return "net-throughput" }
func (netThroughput) Programs() []Program {
	return []Program{programs.Iperf3}
}

func (netThroughput) Defaults() Params {
	return Params{"proto": "tcp", "msg_size": "16384", "streams": "1", "direction": "up", "nodelay": "false", "bitrate": "0", ParamClient: ClientGuest}
}

// iperf3's own limits on its block size (-l).
const (
	iperfMaxTCPBlock = 1 << 20
	iperfMinUDPBlock = 16
	iperfMaxUDPBlock = 65507 // the largest UDP payload over IPv4
)

// bitrateRE is iperf3's rate notation without the burst suffix: bits per
// second with an optional K, M or G (powers of 1000).
var bitrateRE = regexp.MustCompile(`^(0|[1-9][0-9]*[KMG]?)$`)

func (w netThroughput) Validate(p Params) error {
	if err := checkKeys(w, p); err != nil {
		return err
	}
	proto, err := enumParam(p, "proto", "tcp", "udp")
	if err != nil {
		return err
	}
	if proto == "tcp" {
		_, err = intParam(p, "msg_size", 1, iperfMaxTCPBlock)
	} else {
		_, err = intParam(p, "msg_size", iperfMinUDPBlock, iperfMaxUDPBlock)
	}
	if err != nil {
		return fmt.Errorf("%w (for proto %s)", err, proto)
	}
	if _, err := intParam(p, "streams", 1, 128); err != nil {
		return err
	}
	if _, err := enumParam(p, "direction", "up", "down"); err != nil {
		return err
	}
	nodelay, err := enumParam(p, "nodelay", "true", "false")
	if err != nil {
		return err
	}
	if nodelay == "true" && proto != "tcp" {
		return fmt.Errorf("%w: nodelay = true: TCP_NODELAY applies to proto tcp only", ErrBadParam)
	}
	if !bitrateRE.MatchString(p["bitrate"]) {
		return fmt.Errorf("%w: bitrate = %q: want bits per second like 0 (unlimited), 500M or 10G", ErrBadParam, Clip(p["bitrate"]))
	}
	return checkClient(p)
}

func (w netThroughput) Command(Params, time.Duration) (Exec, error) {
	return Exec{}, fmt.Errorf("%s: %w", w.Name(), ErrNeedsNetwork)
}

// Servers is one iperf3 server per guest. It serves TCP and UDP tests on
// the same port (the control connection is always TCP), one test at a
// time, which is what a guest's steps need: they run one after another.
// The server does not depend on the parameters.
func (netThroughput) Servers(_ Params, at Listen) []Server {
	port := at.Port + portIperf3
	return []Server{{Name: "iperf3", Argv: iperf3ServerArgv(at, port), Proto: "tcp", Port: port}}
}

func iperf3ServerArgv(at Listen, port int) []string {
	argv := []string{"iperf3", "-s", "-p", strconv.Itoa(port)}
	if at.Only {
		argv = append(argv, "-B", at.Addr.String())
	}
	return argv
}

// iperfConnectTimeout bounds the control connection's setup, so a missing
// server fails in seconds rather than at the execution's timeout.
const iperfConnectTimeout = 5 * time.Second

func (w netThroughput) NetCommand(p Params, d time.Duration, peer Peer) (NetExec, error) {
	if err := w.Validate(p); err != nil {
		return NetExec{}, err
	}
	if err := checkPeer(peer); err != nil {
		return NetExec{}, err
	}
	argv := []string{"iperf3", "-c", peer.Addr.String(), "-p", strconv.Itoa(peer.Port + portIperf3),
		"-J", "-t", strconv.Itoa(seconds(d)),
		"--connect-timeout", strconv.Itoa(int(iperfConnectTimeout / time.Millisecond)),
		"-l", p["msg_size"], "-P", p["streams"]}
	if p["proto"] == "udp" {
		argv = append(argv, "-u")
	}
	// Always explicit: iperf3's own default is 1 Mbit/s for UDP, which
	// measures nothing about the path.
	argv = append(argv, "-b", p["bitrate"])
	if p["nodelay"] == "true" {
		argv = append(argv, "-N")
	}
	if p["direction"] == "down" {
		argv = append(argv, "-R")
	}
	return NetExec{Exec: Exec{Argv: argv, Timeout: timeoutFor(d)}}, nil
}

// checkPeer rejects a Peer the runner has not filled in.
func checkPeer(peer Peer) error {
	if !peer.Addr.IsValid() || peer.Port < 1 || peer.Port+PortsPerGuest-1 > 65535 {
		return fmt.Errorf("%w: peer %v port %d: want an address and a base port from 1 to %d", ErrBadParam, peer.Addr, peer.Port, 65535-PortsPerGuest+1)
	}
	return nil
}

// iperfOutput is the part of iperf3's JSON output (-J) vfleet reads.
type iperfOutput struct {
	Start struct {
		TestStart struct {
			Protocol   string `json:"protocol"`
			NumStreams int    `json:"num_streams"`
			Reverse    int    `json:"reverse"`
		} `json:"test_start"`
	} `json:"start"`
	End struct {
		SumSent     *iperfSum `json:"sum_sent"`
		SumReceived *iperfSum `json:"sum_received"`
		Sum         *iperfSum `json:"sum"` // UDP: the sender's bytes with the receiver's loss and jitter
		CPU         *struct {
			HostTotal   float64 `json:"host_total"`
			RemoteTotal float64 `json:"remote_total"`
		} `json:"cpu_utilization_percent"`
	} `json:"end"`
	// Error is set instead of results when the test could not run; iperf3
	// may exit 0 all the same.
	Error string `json:"error"`
}

type iperfSum struct {
	Seconds       float64  `json:"seconds"`
	Bytes         float64  `json:"bytes"`
	BitsPerSecond float64  `json:"bits_per_second"`
	Retransmits   *float64 `json:"retransmits"` // TCP sender side, where the OS reports it
	JitterMS      float64  `json:"jitter_ms"`
	LostPercent   float64  `json:"lost_percent"`
}

// jsonAfterWarnings is iperf3's JSON document without the warning lines
// it may print on stdout before it ("WARNING: Size of data read does not
// correspond to offered length", when a read returns less than asked, as
// gVisor's sockets do); the document itself starts a line with "{".
func jsonAfterWarnings(stdout []byte) []byte {
	if bytes.HasPrefix(stdout, []byte("WARNING")) {
		if i := bytes.Index(stdout, []byte("\n{")); i >= 0 {
			return stdout[i+1:]
		}
	}
	return stdout
}

// Parse reads the receiver's throughput: what crossed the path, not what
// the sender managed to hand to its socket (for UDP the two differ by the
// loss).
func (netThroughput) Parse(stdout, stderr []byte) ([]Sample, error) {
	if len(stdout) == 0 {
		return nil, fmt.Errorf("%w: iperf3: no output on stdout; stderr: %s", ErrParse, excerpt(stderr))
	}
	var out iperfOutput
	if err := json.Unmarshal(jsonAfterWarnings(stdout), &out); err != nil {
		// iperf3 reports a bad option on stderr after its usage on stdout.
		return nil, fmt.Errorf("%w: iperf3: output is not JSON (%v); stderr: %s; stdout: %s", ErrParse, err, excerpt(stderr), excerpt(stdout))
	}
	if out.Error != "" {
		return nil, fmt.Errorf("%w: iperf3 reported an error: %s", ErrParse, out.Error)
	}
	proto := out.Start.TestStart.Protocol
	var samples []Sample
	switch proto {
	case "TCP":
		r := out.End.SumReceived
		if r == nil || r.Seconds <= 0 || r.Bytes <= 0 {
			return nil, fmt.Errorf("%w: iperf3: TCP test without data received (end.sum_received)", ErrParse)
		}
		samples = append(samples, Sample{Metric: "net.throughput_bps", Unit: "bit/s", Value: r.BitsPerSecond, Better: HigherIsBetter})
		if s := out.End.SumSent; s != nil && s.Retransmits != nil {
			samples = append(samples, Sample{Metric: "net.retransmits", Unit: "segments", Value: *s.Retransmits, Better: LowerIsBetter})
		}
	case "UDP":
		sum := out.End.Sum
		if sum == nil || sum.Seconds <= 0 {
			return nil, fmt.Errorf("%w: iperf3: UDP test without a result (end.sum)", ErrParse)
		}
		// iperf3 before 3.11 has no sum_received for UDP; its end.sum counts
		// the sender's bytes, so the loss is taken out by hand.
		bps := sum.BitsPerSecond * (1 - sum.LostPercent/100)
		if r := out.End.SumReceived; r != nil && r.Seconds > 0 {
			bps = r.BitsPerSecond
		}
		if bps <= 0 {
			return nil, fmt.Errorf("%w: iperf3: UDP test without data received (%.4g%% lost)", ErrParse, sum.LostPercent)
		}
		samples = append(samples,
			Sample{Metric: "net.throughput_bps", Unit: "bit/s", Value: bps, Better: HigherIsBetter},
			Sample{Metric: "net.lost_pct", Unit: "%", Value: sum.LostPercent, Better: LowerIsBetter},
			Sample{Metric: "net.jitter_us", Unit: "us", Value: sum.JitterMS * 1000, Better: LowerIsBetter},
		)
	default:
		return nil, fmt.Errorf("%w: iperf3: protocol %q in start.test_start: want TCP or UDP", ErrParse, proto)
	}
	cpu := out.End.CPU
	if cpu == nil {
		return nil, fmt.Errorf("%w: iperf3: no end.cpu_utilization_percent", ErrParse)
	}
	samples = append(samples,
		Sample{Metric: "net.cpu_client_pct", Unit: "%", Value: cpu.HostTotal, Better: LowerIsBetter},
		Sample{Metric: "net.cpu_server_pct", Unit: "%", Value: cpu.RemoteTotal, Better: LowerIsBetter},
	)
	// JSON holds only finite numbers, but the unit conversions above can
	// overflow one that no real test reports (a jitter of 1e306 ms).
	for _, s := range samples {
		if math.IsInf(s.Value, 0) || math.IsNaN(s.Value) {
			return nil, fmt.Errorf("%w: iperf3: %s comes out as %v", ErrParse, s.Metric, s.Value)
		}
	}
	return samples, nil
}
