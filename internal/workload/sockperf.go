package workload

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/stats"
	"github.com/vfleet/vfleet/internal/workload/programs"
)

// netLatency measures request/response round trips between a guest and the
// peer with sockperf's ping-pong: the guest sends a message, the peer's
// server echoes it, the guest sends the next one on receipt. Optional
// background iperf3 streams load the same path meanwhile.
//
// vfleet reports the round-trip time, not sockperf's default "latency"
// (half the round trip): halving assumes both directions cost the same,
// which is exactly what isolation layers may break (a guest's transmit and
// receive paths differ), and the round trip is what was measured.
type netLatency struct{}

func init() { Register(netLatency{}) }

func (netLatency) Name() string { return "net-latency" }
func (netLatency) Programs() []Program {
	return []Program{programs.Sockperf, programs.Iperf3}
}

func (netLatency) Defaults() Params {
	return Params{"proto": "udp", "msg_size": "64", "background_streams": "0", "background_direction": "same", ParamClient: ClientGuest}
}

// sockperf's own limits on its message size (-m).
const (
	sockperfMinMsg = 14 // its header
	sockperfMaxMsg = 65507
)

func (w netLatency) Validate(p Params) error {
	if err := checkKeys(w, p); err != nil {
		return err
	}
	if _, err := enumParam(p, "proto", "tcp", "udp"); err != nil {
		return err
	}
	if _, err := intParam(p, "msg_size", sockperfMinMsg, sockperfMaxMsg); err != nil {
		return err
	}
	if _, err := intParam(p, "background_streams", 0, 16); err != nil {
		return err
	}
	if _, err := enumParam(p, "background_direction", "same", "opposite"); err != nil {
		return err
	}
	return checkClient(p)
}

func (w netLatency) Command(Params, time.Duration) (Exec, error) {
	return Exec{}, fmt.Errorf("%s: %w", w.Name(), ErrNeedsNetwork)
}

// Servers are sockperf's echo server for the protocol and, with
// background streams, an iperf3 server of their own: iperf3 serves one test
// at a time, so the load must not depend on net-throughput's server being
// idle. p must have passed Validate.
func (netLatency) Servers(p Params, at Listen) []Server {
	var servers []Server
	sockperf := func(port int, more ...string) []string {
		argv := append([]string{"sockperf", "server", "-p", strconv.Itoa(port)}, more...)
		if at.Only {
			argv = append(argv, "-i", at.Addr.String())
		}
		return argv
	}
	if p["proto"] == "tcp" {
		port := at.Port + portSockperfTCP
		servers = append(servers, Server{Name: "sockperf-tcp", Argv: sockperf(port, "--tcp"), Proto: "tcp", Port: port})
	} else {
		port := at.Port + portSockperfUDP
		servers = append(servers, Server{Name: "sockperf-udp", Argv: sockperf(port), Proto: "udp", Port: port})
	}
	if n, _ := strconv.Atoi(p["background_streams"]); n > 0 {
		port := at.Port + portIperf3Background
		servers = append(servers, Server{Name: "iperf3-background", Argv: iperf3ServerArgv(at, port), Proto: "tcp", Port: port})
	}
	return servers
}

// backgroundLead is how much longer the background load runs than the
// measured client: it starts first and must still be running when the
// measured client ends.
const backgroundLead = 2 * time.Second

// The full log (one line per round trip) is the only way sockperf 3.7, the
// version in the guest image, gives every observation; it has no histogram
// option. A line is about 40 bytes; on a veth pair a round trip took 6 us,
// which makes 6 MB of log per second of run: more than the agent keeps by
// default after a 2-second run. NetCommand asks the agent for
// room in proportion to the duration; the parser still checks that no
// observation is missing, so a smaller limit is an error, never a
// silently shortened distribution.
const (
	fullLogBytesPerObs = 48      // "<packet>, <tx s>, <rx s>, <rtt us>\n" with room for long runs
	fullLogMaxRate     = 250_000 // round trips per second: a 4 us round trip
	fullLogOverhead    = 1 << 20 // sockperf's summary, printed twice
)

// fullLogOutput is the stdout room NetCommand asks for: enough for the
// fastest plausible path, within what the agent grants.
func fullLogOutput(d time.Duration) int64 {
	n := int64(seconds(d))*fullLogMaxRate*fullLogBytesPerObs + fullLogOverhead
	return max(min(n, agent.MaxOutputLimit), agent.MaxOutput)
}

func (w netLatency) NetCommand(p Params, d time.Duration, peer Peer) (NetExec, error) {
	if err := w.Validate(p); err != nil {
		return NetExec{}, err
	}
	if err := checkPeer(peer); err != nil {
		return NetExec{}, err
	}
	if !peer.Addr.Unmap().Is4() {
		return NetExec{}, fmt.Errorf("%w: peer %v: sockperf 3.7 speaks IPv4 only", ErrBadParam, peer.Addr)
	}
	addr := peer.Addr.Unmap().String()
	port := peer.Port + portSockperfUDP
	if p["proto"] == "tcp" {
		port = peer.Port + portSockperfTCP
	}
	argv := []string{"sockperf", "ping-pong", "-i", addr, "-p", strconv.Itoa(port)}
	if p["proto"] == "tcp" {
		argv = append(argv, "--tcp")
	}
	argv = append(argv, "-m", p["msg_size"], "-t", strconv.Itoa(seconds(d)),
		"--full-rtt", "--full-log", "/dev/stdout")
	ne := NetExec{Exec: Exec{Argv: argv, Timeout: timeoutFor(d), MaxOutput: fullLogOutput(d)}}

	if n, _ := strconv.Atoi(p["background_streams"]); n > 0 {
		bd := time.Duration(seconds(d))*time.Second + backgroundLead
		bg := []string{"iperf3", "-c", addr, "-p", strconv.Itoa(peer.Port + portIperf3Background),
			"-t", strconv.Itoa(seconds(bd)),
			"--connect-timeout", strconv.Itoa(int(iperfConnectTimeout / time.Millisecond)),
			"-P", strconv.Itoa(n)}
		if p["background_direction"] == "opposite" {
			bg = append(bg, "-R")
		}
		ne.Background = []Exec{{Argv: bg, Timeout: timeoutFor(bd)}}
	}
	return ne, nil
}

var (
	// sockperf colours some lines; the escapes sit inside the figures.
	ansiRE             = regexp.MustCompile(`\x1b\[[0-9;]*m`)
	sockperfTotalRE    = regexp.MustCompile(`(?m)^sockperf: Total ([0-9]+) observations`)
	sockperfErrorRE    = regexp.MustCompile(`(?m)^sockperf: (ERROR: .*|No messages were received.*)$`)
	sockperfNoValidRE  = regexp.MustCompile(`(?m)^sockperf: No valid observations found`)
	sockperfLogHeadRE  = regexp.MustCompile(`(?m)^packet, txTime\(sec\), rxTime\(sec\), (\w+)\(usec\)$`)
	sockperfLogEndLine = []byte("------------------------------")
)

// Parse builds the round-trip histogram from the full log and derives every
// sample from it, so that the percentiles of one execution are the ones a
// merge of several executions would give.
func (netLatency) Parse(stdout, stderr []byte) ([]Sample, error) {
	if len(bytes.TrimSpace(stdout)) == 0 {
		return nil, fmt.Errorf("%w: sockperf: no output on stdout; stderr: %s", ErrParse, excerpt(stderr))
	}
	if err := (netLatency{}).Explain(stdout, stderr); err != nil {
		return nil, err
	}
	text := ansiRE.ReplaceAll(stdout, nil)
	// sockperf exits 0 on a refused connection or a silent server.
	if m := sockperfErrorRE.FindSubmatch(text); m != nil {
		return nil, fmt.Errorf("%w: sockperf reported an error: %s", ErrParse, bytes.TrimSpace(m[1]))
	}
	// sockperf counts only round trips sent from 400 ms after its first
	// until 50 ms before its last send; a ping-pong that stalls early
	// (a TCP retransmission timeout on a lossy path, twice over) and stays
	// stalled leaves that window empty, and sockperf prints no full log.
	if sockperfNoValidRE.Match(text) {
		return nil, fmt.Errorf("%w: sockperf counted no round trip: none was sent and answered between 400 ms after its start and 50 ms before its last send, so the path stalled for most of the run; a longer duration measures past such a stall", ErrParse)
	}
	head := sockperfLogHeadRE.FindSubmatchIndex(text)
	if head == nil {
		return nil, fmt.Errorf("%w: sockperf: no full log (\"packet, txTime(sec), …\") in the output: %s", ErrParse, excerpt(text))
	}
	if col := string(text[head[2]:head[3]]); col != "rtt" {
		return nil, fmt.Errorf("%w: sockperf: the full log holds %q, want \"rtt\" (run with --full-rtt)", ErrParse, col)
	}
	m := sockperfTotalRE.FindSubmatch(text[:head[0]])
	if m == nil {
		return nil, fmt.Errorf("%w: sockperf: no \"Total N observations\" line before the full log", ErrParse)
	}
	total, err := strconv.ParseUint(string(m[1]), 10, 64)
	if err != nil || total == 0 {
		return nil, fmt.Errorf("%w: sockperf: observation count %q", ErrParse, m[1])
	}

	h := stats.NewHistogram("us")
	rows := text[head[1]:]
	ended := false
	for line := range bytes.Lines(rows) {
		// An unterminated last line is where the output was cut: even when
		// it parses, its number may have lost digits.
		if !bytes.HasSuffix(line, []byte("\n")) {
			break
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if bytes.Equal(line, sockperfLogEndLine) {
			ended = true
			break
		}
		rtt, err := sockperfRowRTT(line)
		if err != nil {
			return nil, fmt.Errorf("%w: sockperf full log, row %d: %v", ErrParse, h.Count()+1, err)
		}
		h.Add(rtt)
	}
	if h.Count() != total || !ended {
		return nil, fmt.Errorf("%w: sockperf full log has %d of the %d observations sockperf counted (output cut short at the agent's limit? shorten the duration)", ErrParse, h.Count(), total)
	}

	us := func(metric string, v float64) Sample {
		return Sample{Metric: metric, Unit: "us", Value: v, Better: LowerIsBetter}
	}
	dist := us("net.rtt_us", h.Quantile(0.5))
	dist.Hist = h
	return []Sample{
		dist,
		us("net.rtt_us.p50", h.Quantile(0.5)),
		us("net.rtt_us.p90", h.Quantile(0.9)),
		us("net.rtt_us.p99", h.Quantile(0.99)),
		us("net.rtt_us.p999", h.Quantile(0.999)),
		us("net.rtt_us.min", h.Min()),
		us("net.rtt_us.max", h.Max()),
		us("net.rtt_us.mean", h.Mean()),
		us("net.rtt_us.stddev", h.StdDev()),
	}, nil
}

// sockperfMaxRTT bounds a round trip, in microseconds: an hour, longer
// than any run. A larger figure is garbage, and squaring it for the
// standard deviation would overflow.
const sockperfMaxRTT = 3600e6

// sockperfRowRTT reads the last of the four comma-separated fields of a
// full-log row: packet number, send and receive time in seconds, round
// trip in microseconds.
func sockperfRowRTT(line []byte) (float64, error) {
	if bytes.Count(line, []byte(",")) != 3 {
		return 0, fmt.Errorf("%.80q: want 4 comma-separated fields", line)
	}
	field := bytes.TrimSpace(line[bytes.LastIndexByte(line, ',')+1:])
	v, err := strconv.ParseFloat(string(field), 64)
	if err != nil || !(v >= 0 && v <= sockperfMaxRTT) {
		return 0, fmt.Errorf("%.80q: round trip %q is not a duration in microseconds", line, field)
	}
	return v, nil
}

// sockperfRecvEINVAL is sockperf 3.7's report of a recvfrom(2) the guest's
// kernel refuses with EINVAL, which gVisor's sockets on the host's network
// (runsc --network=host) do with the flags sockperf passes.
var sockperfRecvEINVAL = regexp.MustCompile(`(?m)^sockperf: ERROR: recvfrom\(\) Failed receiving on fd\[\d+\] \(errno=22 `)

// Explain: a guest whose sockets refuse sockperf's receive calls cannot
// run it at all; its other steps are skipped, not failed one by one.
func (netLatency) Explain(stdout, _ []byte) error {
	if sockperfRecvEINVAL.Match(stdout) {
		return fmt.Errorf("%w: this guest's sockets refuse sockperf's recvfrom() (EINVAL), as gVisor's do; "+
			"net-throughput (iperf3) runs there, or a net-command with a client of your own", ErrNotSupported)
	}
	return nil
}
