package workload

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
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
	return Params{"proto": "tcp", "msg_size": "16384", "streams": "1", "threads": "1", "direction": "up", "nodelay": "false", "bitrate": "0", ParamClient: ClientGuest}
}

// iperf3's own limits on its block size (-l).
const (
	iperfMaxTCPBlock = 1 << 20
	iperfMinUDPBlock = 16
	iperfMaxUDPBlock = 65507 // the largest UDP payload over IPv4
)

// iperfMaxStreams is iperf3's own cap on -P. Past it net-throughput runs
// several clients at once, each against its own server, and sums them;
// maxStreams is where that stops (one server per client on the guest's
// ports).
//
// An iperf3 client before 3.16 (Debian 12 has 3.12) sends all its streams
// from one thread, so sender threads are clients too: maxThreads of them
// fit the guest's ports beside the other servers', as 1 000 streams do.
const (
	iperfMaxStreams = 128
	maxStreams      = 1000
	maxThreads      = 8
)

// clientStreams splits n streams over the fewest iperf3 clients that hold
// them, and at least threads of them, as evenly as they go.
func clientStreams(n, threads int) []int {
	k := max((n+iperfMaxStreams-1)/iperfMaxStreams, threads)
	split := make([]int, k)
	for i := range split {
		split[i] = n / k
		if i < n%k {
			split[i]++
		}
	}
	return split
}

// clientPort is the server port of client i of a guest's clients.
func clientPort(base, i int) int {
	if i == 0 {
		return base + portIperf3
	}
	return base + portIperf3More + i - 1
}

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
	streams, err := intParam(p, "streams", 1, maxStreams)
	if err != nil {
		return err
	}
	if streams > iperfMaxStreams && proto != "tcp" {
		return fmt.Errorf("%w: streams = %d: more than %d streams are connections, for proto tcp only", ErrBadParam, streams, iperfMaxStreams)
	}
	threads, err := intParam(p, "threads", 1, maxThreads)
	if err != nil {
		return err
	}
	switch {
	case threads > streams:
		return fmt.Errorf("%w: threads = %d: each sender thread needs a stream of its own, and streams = %d", ErrBadParam, threads, streams)
	case threads > 1 && proto != "tcp":
		return fmt.Errorf("%w: threads = %d: several senders' loss and jitter do not add up, so more than one is for proto tcp only", ErrBadParam, threads)
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

// Servers is one iperf3 server per guest, and one more for each further
// client when the streams need several. A server serves TCP and UDP tests
// on the same port (the control connection is always TCP), one test at a
// time, which is what a guest's steps need: they run one after another.
func (netThroughput) Servers(p Params, at Listen) []Server {
	var servers []Server
	for i := range clientStreams(splitParams(p)) {
		name := "iperf3"
		if i > 0 {
			name = fmt.Sprintf("iperf3-%d", i+1)
		}
		port := clientPort(at.Port, i)
		servers = append(servers, Server{Name: name, Argv: iperf3ServerArgv(at, port), Proto: "tcp", Port: port})
	}
	return servers
}

// splitParams are the streams and sender threads of validated params, or
// of params Validate rejects, one of each: a server per guest then serves
// every other step.
func splitParams(p Params) (streams, threads int) {
	streams, err := strconv.Atoi(p["streams"])
	if err != nil || streams < 1 || streams > maxStreams {
		return 1, 1
	}
	threads, err = strconv.Atoi(p["threads"])
	if err != nil || threads < 1 || threads > min(streams, maxThreads) {
		return streams, 1
	}
	return streams, threads
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
	split := clientStreams(splitParams(p))
	if len(split) == 1 {
		return NetExec{Exec: Exec{Argv: iperf3ClientArgv(p, d, peer, 0, split[0]), Timeout: timeoutFor(d)}}, nil
	}
	return NetExec{Exec: Exec{Argv: iperf3Clients(p, d, peer, split), Timeout: timeoutFor(d)}}, nil
}

// iperf3Clients runs one iperf3 client per element of split at once, each
// against its own server, and prints their JSON documents one after the
// other. Each writes to its own file: a document is larger than a pipe
// writes at once, so on a shared stdout two would interleave. The clients
// start within milliseconds of each other, small against a test of
// seconds, and each reports its own interval, so their sum is the path's
// throughput over the overlap. The exit status is the first failure's.
func iperf3Clients(p Params, d time.Duration, peer Peer, split []int) []string {
	var b strings.Builder
	b.WriteString(`d=$(mktemp -d) || exit 1; trap 'rm -rf "$d"' EXIT; pids=""; `)
	for i, n := range split {
		fmt.Fprintf(&b, "%s >\"$d/%d\" 2>&1 & pids=\"$pids $!\"; ", strings.Join(iperf3ClientArgv(p, d, peer, i, n), " "), i)
	}
	b.WriteString(`rc=0; for p in $pids; do wait "$p" || { s=$?; [ "$rc" = 0 ] && rc=$s; }; done; `)
	for i := range split {
		fmt.Fprintf(&b, "cat \"$d/%d\"; ", i)
	}
	b.WriteString(`exit "$rc"`)
	return []string{"sh", "-c", b.String()}
}

// iperf3ClientArgv is client i's command line for n streams. Every word is
// a number, an address or a fixed option: iperf3Clients joins them into a
// shell command without quoting.
func iperf3ClientArgv(p Params, d time.Duration, peer Peer, i, n int) []string {
	argv := []string{"iperf3", "-c", peer.Addr.String(), "-p", strconv.Itoa(clientPort(peer.Port, i)),
		"-J", "-t", strconv.Itoa(seconds(d)),
		"--connect-timeout", strconv.Itoa(int(iperfConnectTimeout / time.Millisecond)),
		"-l", p["msg_size"], "-P", strconv.Itoa(n)}
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
	return argv
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

// iperfDocuments are the JSON documents on stdout: one per client, after
// dropping the warning lines iperf3 may print before one ("WARNING: Size
// of data read does not correspond to offered length", when a read returns
// less than asked, as gVisor's sockets do). No line of a document starts
// with a letter.
func iperfDocuments(stdout []byte) ([]iperfOutput, error) {
	var kept bytes.Buffer
	for _, line := range bytes.SplitAfter(stdout, []byte("\n")) {
		if !bytes.HasPrefix(line, []byte("WARNING")) {
			kept.Write(line)
		}
	}
	dec := json.NewDecoder(&kept)
	var docs []iperfOutput
	for {
		var out iperfOutput
		err := dec.Decode(&out)
		if errors.Is(err, io.EOF) && len(docs) > 0 {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, out)
	}
}

// Parse reads the receiver's throughput: what crossed the path, not what
// the sender managed to hand to its socket (for UDP the two differ by the
// loss). Several clients' documents (more streams than one client opens)
// add up: bytes, retransmits and each process's CPU time are all sums.
func (netThroughput) Parse(stdout, stderr []byte) ([]Sample, error) {
	if len(stdout) == 0 {
		return nil, fmt.Errorf("%w: iperf3: no output on stdout; stderr: %s", ErrParse, excerpt(stderr))
	}
	docs, err := iperfDocuments(stdout)
	if err != nil {
		// iperf3 reports a bad option on stderr after its usage on stdout.
		return nil, fmt.Errorf("%w: iperf3: output is not JSON (%v); stderr: %s; stdout: %s", ErrParse, err, excerpt(stderr), excerpt(stdout))
	}
	var total []Sample
	for i, out := range docs {
		samples, err := parseIperf(out)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			total = samples
			continue
		}
		if out.Start.TestStart.Protocol != "TCP" || len(samples) != len(total) {
			return nil, fmt.Errorf("%w: iperf3: client %d of %d: several clients' results add up for TCP only", ErrParse, i+1, len(docs))
		}
		for j := range total {
			total[j].Value += samples[j].Value
		}
	}
	return total, nil
}

// parseIperf reads one client's document.
func parseIperf(out iperfOutput) ([]Sample, error) {
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
