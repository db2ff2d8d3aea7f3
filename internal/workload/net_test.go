package workload

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/stats"
)

// readRecording reads a recorded output, or its gzip-compressed copy: a
// sockperf full log has a line per round trip, megabytes per second of run.
func readRecording(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if !errors.Is(err, os.ErrNotExist) {
		return b, err
	}
	f, err := os.Open(path + ".gz")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(z)
}

var testPeer = Peer{Addr: netip.MustParseAddr("198.18.0.1"), Port: 20000}

func networked(t *testing.T, name string) Networked {
	t.Helper()
	n, ok := mustLookup(t, name).(Networked)
	if !ok {
		t.Fatalf("%s does not implement Networked", name)
	}
	return n
}

func TestNetworkWorkloadsNeedAPeer(t *testing.T) {
	for _, name := range []string{"net-throughput", "net-latency"} {
		w := mustLookup(t, name)
		if _, err := w.Command(w.Defaults(), 3*time.Second); !errors.Is(err, ErrNeedsNetwork) {
			t.Errorf("%s: Command err = %v, want ErrNeedsNetwork", name, err)
		}
		n := networked(t, name)
		for _, bad := range []Peer{{}, {Addr: testPeer.Addr}, {Addr: testPeer.Addr, Port: 65535}} {
			if _, err := n.NetCommand(w.Defaults(), 3*time.Second, bad); !errors.Is(err, ErrBadParam) {
				t.Errorf("%s: peer %+v: err = %v, want ErrBadParam", name, bad, err)
			}
		}
	}
	_, err := networked(t, "net-latency").NetCommand(Params{"proto": "udp", "msg_size": "64", "background_streams": "0", "background_direction": "same"},
		time.Second, Peer{Addr: netip.MustParseAddr("fd00::1"), Port: 20000})
	if !errors.Is(err, ErrBadParam) || !strings.Contains(err.Error(), "IPv4") {
		t.Errorf("sockperf to an IPv6 peer: err = %v", err)
	}
}

func TestNetCommands(t *testing.T) {
	for _, tc := range []struct {
		name, workload string
		params         Params
		d              time.Duration
		want           []string
		background     [][]string
	}{
		{"iperf3 defaults", "net-throughput", nil, 3 * time.Second,
			[]string{"iperf3", "-c", "198.18.0.1", "-p", "20000", "-J", "-t", "3", "--connect-timeout", "5000", "-l", "16384", "-P", "1", "-b", "0"}, nil},
		{"iperf3 udp down", "net-throughput", Params{"proto": "udp", "msg_size": "64", "streams": "4", "direction": "down", "bitrate": "500M"}, 2 * time.Second,
			[]string{"iperf3", "-c", "198.18.0.1", "-p", "20000", "-J", "-t", "2", "--connect-timeout", "5000", "-l", "64", "-P", "4", "-u", "-b", "500M", "-R"}, nil},
		{"iperf3 tcp nodelay", "net-throughput", Params{"nodelay": "true"}, 10 * time.Second,
			[]string{"iperf3", "-c", "198.18.0.1", "-p", "20000", "-J", "-t", "10", "--connect-timeout", "5000", "-l", "16384", "-P", "1", "-b", "0", "-N"}, nil},
		{"sockperf defaults", "net-latency", nil, 3 * time.Second,
			[]string{"sockperf", "ping-pong", "-i", "198.18.0.1", "-p", "20001", "-m", "64", "-t", "3", "--full-rtt", "--full-log", "/dev/stdout"}, nil},
		{"sockperf tcp with load", "net-latency", Params{"proto": "tcp", "msg_size": "1024", "background_streams": "2", "background_direction": "opposite"}, 3 * time.Second,
			[]string{"sockperf", "ping-pong", "-i", "198.18.0.1", "-p", "20002", "--tcp", "-m", "1024", "-t", "3", "--full-rtt", "--full-log", "/dev/stdout"},
			[][]string{{"iperf3", "-c", "198.18.0.1", "-p", "20003", "-t", "5", "--connect-timeout", "5000", "-P", "2", "-R"}}},
		{"sockperf same-direction load", "net-latency", Params{"background_streams": "16"}, time.Second,
			[]string{"sockperf", "ping-pong", "-i", "198.18.0.1", "-p", "20001", "-m", "64", "-t", "1", "--full-rtt", "--full-log", "/dev/stdout"},
			[][]string{{"iperf3", "-c", "198.18.0.1", "-p", "20003", "-t", "3", "--connect-timeout", "5000", "-P", "16"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := networked(t, tc.workload)
			ne, err := w.NetCommand(merge(w.Defaults(), tc.params), tc.d, testPeer)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ne.Argv, tc.want) {
				t.Errorf("argv:\n got %q\nwant %q", ne.Argv, tc.want)
			}
			if ne.Timeout <= tc.d {
				t.Errorf("timeout %s leaves no room beyond the duration %s", ne.Timeout, tc.d)
			}
			if len(ne.Background) != len(tc.background) {
				t.Fatalf("background = %+v, want %q", ne.Background, tc.background)
			}
			for i, bg := range ne.Background {
				if !reflect.DeepEqual(bg.Argv, tc.background[i]) {
					t.Errorf("background %d:\n got %q\nwant %q", i, bg.Argv, tc.background[i])
				}
				// The load must outlast the measured client, and end by itself.
				secs, _ := strconv.Atoi(bg.Argv[slicesIndex(bg.Argv, "-t")+1])
				if time.Duration(secs)*time.Second <= tc.d || bg.Timeout <= time.Duration(secs)*time.Second {
					t.Errorf("background runs %d s with timeout %s for a %s measurement", secs, bg.Timeout, tc.d)
				}
			}
		})
	}
}

func slicesIndex(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// The servers a workload asks for must be the ones its clients connect to,
// inside the guest's port range, with one process per Name.
func TestServersMatchClients(t *testing.T) {
	base := testPeer.Port
	for _, tc := range []struct {
		workload string
		params   Params
		want     map[string]string // Name -> "proto/port"
	}{
		{"net-throughput", nil, map[string]string{"iperf3": "tcp/20000"}},
		{"net-throughput", Params{"proto": "udp"}, map[string]string{"iperf3": "tcp/20000"}},
		{"net-latency", nil, map[string]string{"sockperf-udp": "udp/20001"}},
		{"net-latency", Params{"proto": "tcp"}, map[string]string{"sockperf-tcp": "tcp/20002"}},
		{"net-latency", Params{"proto": "tcp", "background_streams": "1"}, map[string]string{"sockperf-tcp": "tcp/20002", "iperf3-background": "tcp/20003"}},
	} {
		w := networked(t, tc.workload)
		p := merge(w.Defaults(), tc.params)
		servers := w.Servers(p, Listen{Port: base})
		got := map[string]string{}
		for _, s := range servers {
			got[s.Name] = s.Proto + "/" + strconv.Itoa(s.Port)
			if s.Port < base || s.Port >= base+PortsPerGuest {
				t.Errorf("%s: server %s port %d outside [%d, %d)", tc.workload, s.Name, s.Port, base, base+PortsPerGuest)
			}
			if !slicesContains(s.Argv, strconv.Itoa(s.Port)) {
				t.Errorf("%s: server %s argv %q does not listen on its port %d", tc.workload, s.Name, s.Argv, s.Port)
			}
			if (s.Proto == "tcp") != (s.Argv[0] == "iperf3" || slicesContains(s.Argv, "--tcp")) {
				t.Errorf("%s: server %s proto %s for argv %q", tc.workload, s.Name, s.Proto, s.Argv)
			}
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s %v: servers %v, want %v", tc.workload, tc.params, got, tc.want)
		}
		ne, err := w.NetCommand(p, 3*time.Second, testPeer)
		if err != nil {
			t.Fatal(err)
		}
		for _, ex := range append([]Exec{ne.Exec}, ne.Background...) {
			port := ex.Argv[slicesIndex(ex.Argv, "-p")+1]
			found := false
			for _, s := range servers {
				found = found || (strconv.Itoa(s.Port) == port && s.Argv[0] == ex.Argv[0])
			}
			if !found {
				t.Errorf("%s %v: client %q connects to port %s, served by none of %+v", tc.workload, tc.params, ex.Argv, port, servers)
			}
		}
	}
	// A server Name must always mean the same process.
	argvByName := map[string][]string{}
	for _, name := range []string{"net-throughput", "net-latency"} {
		w := networked(t, name)
		for _, p := range []Params{{"proto": "tcp", "background_streams": "3"}, {"proto": "udp", "background_streams": "1"}} {
			for k := range p {
				if _, ok := w.Defaults()[k]; !ok {
					delete(p, k)
				}
			}
			for _, s := range w.Servers(merge(w.Defaults(), p), Listen{Port: base}) {
				if prev, ok := argvByName[s.Name]; ok && !reflect.DeepEqual(prev, s.Argv) {
					t.Errorf("server %s: argv %q and %q", s.Name, prev, s.Argv)
				}
				argvByName[s.Name] = s.Argv
			}
		}
	}
}

func slicesContains(s []string, v string) bool { return slicesIndex(s, v) >= 0 }

func TestNetValidateRejectsBadParams(t *testing.T) {
	for _, tc := range []struct {
		workload string
		params   Params
		mention  string
	}{
		{"net-throughput", Params{"proto": "sctp"}, "allowed: tcp, udp"},
		{"net-throughput", Params{"msg_size": "0"}, "msg_size"},
		{"net-throughput", Params{"msg_size": "2000000"}, "from 1 to 1048576"},
		{"net-throughput", Params{"proto": "udp", "msg_size": "65508"}, "from 16 to 65507 (for proto udp)"},
		{"net-throughput", Params{"streams": "1001"}, "streams"},
		{"net-throughput", Params{"direction": "both"}, "allowed: up, down"},
		{"net-throughput", Params{"nodelay": "yes"}, "nodelay"},
		{"net-throughput", Params{"proto": "udp", "nodelay": "true"}, "tcp only"},
		{"net-throughput", Params{"bitrate": "1 Gbit"}, "bitrate"},
		{"net-throughput", Params{"bitrate": "-5"}, "bitrate"},
		{"net-throughput", Params{"background_streams": "1"}, `no parameter "background_streams"`},
		{"net-latency", Params{"proto": "icmp"}, "allowed: tcp, udp"},
		{"net-latency", Params{"msg_size": "13"}, "from 14 to 65507"},
		{"net-latency", Params{"background_streams": "17"}, "from 0 to 16"},
		{"net-latency", Params{"background_direction": "down"}, "allowed: same, opposite"},
		{"net-latency", Params{"streams": "2"}, `no parameter "streams"`},
	} {
		w := networked(t, tc.workload)
		p := merge(w.Defaults(), tc.params)
		err := w.Validate(p)
		if !errors.Is(err, ErrBadParam) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%s %v: err = %v, want ErrBadParam mentioning %q", tc.workload, tc.params, err, tc.mention)
		}
		if _, err := w.NetCommand(p, time.Second, testPeer); !errors.Is(err, ErrBadParam) {
			t.Errorf("%s %v: NetCommand err = %v, want ErrBadParam", tc.workload, tc.params, err)
		}
	}
	w := networked(t, "net-throughput")
	for _, p := range []Params{{"msg_size": "64"}, {"proto": "udp", "msg_size": "65507", "bitrate": "10G"}, {"nodelay": "true", "bitrate": "500M"}} {
		if err := w.Validate(merge(w.Defaults(), p)); err != nil {
			t.Errorf("%v: %v", p, err)
		}
	}
}

func TestParseIperf3(t *testing.T) {
	w := mustLookup(t, "net-throughput")
	for _, tc := range []struct {
		recording string
		want      map[string]float64
	}{
		// Receiver side: sum_received, not sum_sent (7094977641.79807).
		{"iperf3-tcp-up", map[string]float64{"net.throughput_bps": 7087678706.83996, "net.retransmits": 9487,
			"net.cpu_client_pct": 69.21901449240656, "net.cpu_server_pct": 36.094160285146614}},
		{"iperf3-tcp-down", map[string]float64{"net.throughput_bps": 9983817990.00633, "net.retransmits": 441}},
		// The warning iperf3 3.12 printed before its JSON in a gVisor guest
		// here, before the TCP recording above: the figures are read past it.
		{"iperf3-tcp-warning", map[string]float64{"net.throughput_bps": 7087678706.83996, "net.retransmits": 9487}},
		// UDP: what arrived (sum_received), not end.sum's sender bytes (3.2 Gbit/s).
		{"iperf3-udp-up", map[string]float64{"net.throughput_bps": 1109954303.198776, "net.lost_pct": 65.4235277700251,
			"net.jitter_us": 1.3800572274078212, "net.retransmits": -1}},
		// Two clients of 100 streams each on loopback, as net-throughput runs
		// them past 128 streams: their figures add up.
		{"iperf3-tcp-2clients", map[string]float64{"net.throughput_bps": 1936243452.575011, "net.retransmits": 0,
			"net.cpu_client_pct": 117.46017067889767, "net.cpu_server_pct": 81.99104824395673}},
		{"iperf3-udp-down", map[string]float64{"net.throughput_bps": 64524221.3788931, "net.lost_pct": 59.71850697371141,
			"net.cpu_client_pct": 35.6663540117944, "net.cpu_server_pct": 63.970164461718326}},
	} {
		stdout, stderr := recorded(t, tc.recording)
		samples, err := w.Parse(stdout, stderr)
		if err != nil {
			t.Fatalf("%s: %v", tc.recording, err)
		}
		for metric, want := range tc.want {
			if got := find(samples, metric); math.Abs(got-want) > 1e-9*math.Abs(want) {
				t.Errorf("%s: %s = %v, want %v", tc.recording, metric, got, want)
			}
		}
		for _, s := range samples {
			if !strings.HasPrefix(s.Metric, "net.") || s.Hist != nil {
				t.Errorf("%s: sample %+v", tc.recording, s)
			}
		}
	}
}

// TestThousandStreamsSplitOverClients: past iperf3's 128 streams the
// client command runs eight clients of 125 streams, each on the port of
// one of the eight servers.
func TestThousandStreamsSplitOverClients(t *testing.T) {
	w := mustLookup(t, "net-throughput").(Networked)
	p := merge(w.Defaults(), Params{"streams": "1000", "msg_size": "390"})
	at := Listen{Addr: netip.MustParseAddr("198.18.0.1"), Port: 20000}
	servers := w.Servers(p, at)
	if len(servers) != 8 {
		t.Fatalf("%d servers, want 8", len(servers))
	}
	ne, err := w.NetCommand(p, 3*time.Second, Peer{Addr: at.Addr, Port: at.Port})
	if err != nil {
		t.Fatal(err)
	}
	script := ne.Argv[len(ne.Argv)-1]
	if ne.Argv[0] != "sh" || strings.Count(script, "-P 125 ") != 8 || strings.Count(script, "-l 390 ") != 8 {
		t.Fatalf("argv %q: want 8 clients of 125 streams of 390 B", ne.Argv)
	}
	for _, s := range servers {
		if s.Port < at.Port || s.Port >= at.Port+PortsPerGuest || !strings.Contains(script, fmt.Sprintf(" -p %d ", s.Port)) {
			t.Errorf("server %s on port %d: no client for it in %q", s.Name, s.Port, script)
		}
	}
	if _, err := w.NetCommand(merge(w.Defaults(), Params{"streams": "200", "proto": "udp"}), time.Second, Peer{Addr: at.Addr, Port: at.Port}); !errors.Is(err, ErrBadParam) {
		t.Errorf("200 UDP streams: err = %v, want ErrBadParam", err)
	}
}

// TestSenderThreadsAreClients: iperf3 3.12 sends all of a client's
// streams from one thread, so two sender threads are two clients of one
// stream each, against two servers; and a thread needs a stream.
func TestSenderThreadsAreClients(t *testing.T) {
	w := mustLookup(t, "net-throughput").(Networked)
	at := Listen{Addr: netip.MustParseAddr("198.18.0.1"), Port: 20000}
	for _, tc := range []struct {
		streams, threads string
		clients          int
		perClient        string
	}{{"2", "2", 2, "-P 1 "}, {"4", "2", 2, "-P 2 "}, {"2", "1", 1, "-P 2 "}, {"300", "4", 4, "-P 75 "}} {
		p := merge(w.Defaults(), Params{"streams": tc.streams, "threads": tc.threads})
		if err := w.Validate(p); err != nil {
			t.Fatalf("%s streams, %s threads: %v", tc.streams, tc.threads, err)
		}
		if n := len(w.Servers(p, at)); n != tc.clients {
			t.Errorf("%s streams, %s threads: %d servers, want %d", tc.streams, tc.threads, n, tc.clients)
		}
		ne, err := w.NetCommand(p, time.Second, Peer{Addr: at.Addr, Port: at.Port})
		if err != nil {
			t.Fatal(err)
		}
		cmd := strings.Join(ne.Argv, " ") + " "
		if strings.Count(cmd, "iperf3 -c") != tc.clients || strings.Count(cmd, tc.perClient) != tc.clients {
			t.Errorf("%s streams, %s threads: argv %q, want %d clients with %q", tc.streams, tc.threads, ne.Argv, tc.clients, tc.perClient)
		}
	}
	for _, bad := range []Params{{"streams": "1", "threads": "2"}, {"streams": "4", "threads": "2", "proto": "udp"}, {"streams": "16", "threads": "9"}, {"threads": "0"}} {
		if err := w.Validate(merge(w.Defaults(), bad)); !errors.Is(err, ErrBadParam) {
			t.Errorf("%v: err = %v, want ErrBadParam", bad, err)
		}
	}
}

func TestParseIperf3OlderUDPWithoutSumReceived(t *testing.T) {
	stdout, stderr := recorded(t, "iperf3-udp-up")
	// iperf3 before 3.11 wrote no sum_received for UDP.
	old := regexp.MustCompile(`(?s)"sum_received":\s*\{.*?\},`).ReplaceAll(stdout, nil)
	if bytes.Equal(old, stdout) {
		t.Fatal("recording has no sum_received to remove")
	}
	samples, err := mustLookup(t, "net-throughput").Parse(old, stderr)
	if err != nil {
		t.Fatal(err)
	}
	// end.sum's sender rate less the loss: 3210339106.948 * (1 - 0.654235).
	if got := find(samples, "net.throughput_bps"); math.Abs(got-1.110032e9)/1.11e9 > 1e-5 {
		t.Errorf("throughput = %v, want the sender's rate less the loss", got)
	}
}

func TestParseIperf3Failures(t *testing.T) {
	w := mustLookup(t, "net-throughput")
	stdout, _ := recorded(t, "iperf3-tcp-up")
	for _, tc := range []struct {
		name           string
		stdout, stderr []byte
		mention        string
	}{
		{"refused", nil, nil, "iperf3 reported an error: unable to connect to server: Connection refused"},
		{"busy", nil, nil, "the server is busy running a test"},
		{"badopt", nil, nil, "block size invalid"},
		{"empty", []byte{}, []byte("iperf3: error - something\n"), "no output on stdout; stderr: iperf3: error - something"},
		{"truncated", stdout[:len(stdout)/2], nil, "not JSON"},
		{"no receiver sum", bytes.Replace(stdout, []byte(`"sum_received"`), []byte(`"sum_elsewhere"`), 1), nil, "sum_received"},
		{"no cpu", bytes.Replace(stdout, []byte(`"cpu_utilization_percent"`), []byte(`"cpu"`), 1), nil, "cpu_utilization_percent"},
		{"other protocol", bytes.Replace(stdout, []byte(`"protocol":	"TCP"`), []byte(`"protocol":	"SCTP"`), 1), nil, `"SCTP"`},
		{"error with results", bytes.Replace(stdout, []byte("\n}"), []byte(",\n\"error\": \"control socket has closed unexpectedly\"\n}"), 1), nil, "control socket has closed unexpectedly"},
	} {
		if tc.stdout == nil {
			tc.stdout, tc.stderr = recorded(t, "iperf3-"+tc.name)
		}
		_, err := w.Parse(tc.stdout, tc.stderr)
		if !errors.Is(err, ErrParse) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%s: err = %v, want ErrParse mentioning %q", tc.name, err, tc.mention)
		}
	}
}

// sockperfFigures reads sockperf's own summary of a recording, to check
// the histogram against the tool's exact figures.
func sockperfFigures(t *testing.T, stdout []byte) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	re := regexp.MustCompile(`(?m)^sockperf: ---> (?:percentile ([0-9.]+)|<(MIN|MAX)> observation) =\s*([0-9.]+)$`)
	for _, m := range re.FindAllSubmatch(stdout, -1) {
		key := string(m[1]) + string(m[2])
		v, err := strconv.ParseFloat(string(m[3]), 64)
		if err != nil {
			t.Fatal(err)
		}
		out[key] = v
	}
	m := regexp.MustCompile(`avg-rtt=([0-9.]+) \(std-dev=([0-9.]+)\)`).FindSubmatch(stdout)
	if m == nil || len(out) < 10 {
		t.Fatalf("no summary in the recording: %v", out)
	}
	out["mean"], _ = strconv.ParseFloat(string(m[1]), 64)
	out["stddev"], _ = strconv.ParseFloat(string(m[2]), 64)
	return out
}

func TestParseSockperfFullLog(t *testing.T) {
	w := mustLookup(t, "net-latency")
	for _, tc := range []struct {
		recording string
		count     uint64
	}{
		{"sockperf-udp", 70111},
		{"sockperf-tcp-bg", 96220},
	} {
		t.Run(tc.recording, func(t *testing.T) {
			stdout, stderr := recorded(t, tc.recording)
			samples, err := w.Parse(stdout, stderr)
			if err != nil {
				t.Fatal(err)
			}
			var metrics []string
			var h *stats.Histogram
			for _, s := range samples {
				metrics = append(metrics, s.Metric)
				if s.Unit != "us" || s.Better != LowerIsBetter {
					t.Errorf("sample %+v", s)
				}
				if s.Hist != nil {
					if s.Metric != "net.rtt_us" || h != nil {
						t.Errorf("histogram on %s", s.Metric)
					}
					h = s.Hist
				}
			}
			if got := strings.Join(metrics, ","); got != "net.rtt_us,net.rtt_us.p50,net.rtt_us.p90,net.rtt_us.p99,net.rtt_us.p999,net.rtt_us.min,net.rtt_us.max,net.rtt_us.mean,net.rtt_us.stddev" {
				t.Fatalf("metrics = %s", got)
			}
			if h == nil || h.Count() != tc.count || h.Unit() != "us" {
				t.Fatalf("histogram %v, want %d observations in us", h, tc.count)
			}
			// sockperf's own figures, computed from the same observations
			// before the log rounded them to the nanosecond: min, max,
			// mean and stddev to the printed precision, percentiles within
			// the histogram's error (sockperf
			// rounds its percentile ranks its own way, so a step in a
			// sparse tail may separate the two: only the body is compared).
			own := sockperfFigures(t, stdout)
			approx := func(metric string, want, tol float64) {
				if got := find(samples, metric); math.Abs(got-want) > tol {
					t.Errorf("%s = %v, sockperf says %v (tolerance %v)", metric, got, want, tol)
				}
			}
			approx("net.rtt_us.min", own["MIN"], 0.0015)
			approx("net.rtt_us.max", own["MAX"], 0.0015)
			approx("net.rtt_us.mean", own["mean"], 0.0015)
			approx("net.rtt_us.stddev", own["stddev"], 0.001*own["stddev"]+0.0015)
			for _, q := range []string{"50.000", "90.000"} {
				approx("net.rtt_us.p"+strings.TrimSuffix(q, ".000"), own[q], own[q]*stats.HistogramRelError)
			}
			if find(samples, "net.rtt_us") != find(samples, "net.rtt_us.p50") {
				t.Errorf("net.rtt_us is not the median")
			}
		})
	}
}

func TestParseSockperfFailures(t *testing.T) {
	w := mustLookup(t, "net-latency")
	full, _ := recorded(t, "sockperf-udp")
	for _, tc := range []struct {
		name    string
		stdout  []byte
		mention string
	}{
		{"tcp-refused", nil, "sockperf reported an error: ERROR: Can`t connect socket (errno=111 Connection refused)"},
		{"udp-noserver", nil, "No messages were received from the server"},
		// The server held still from 200 ms into a 1 s run to its end.
		{"tcp-stalled", nil, "sockperf counted no round trip"},
		{"empty", []byte("\n"), "no output on stdout"},
		{"no full log", full[:bytes.Index(full, []byte("packet, txTime"))], "no full log"},
		// Of a too long output the agent keeps the beginning and the end.
		{"cut short", full[:len(full)/2], "full log has 35147 of the 70111 observations"},
		{"cut in the middle", cutMiddle(full, len(full)/4, len(full)/2), "full log has 52631 of the 70111 observations"},
		{"cut mid-row", full[:len(full)/2+17], "full log"},
		{"row missing", bytes.Replace(full, []byte("\n1000, "), []byte("\nx"), 1), "row 1001"},
		{"one-way latency", bytes.Replace(full, []byte("rtt(usec)"), []byte("latency(usec)"), 1), "--full-rtt"},
		{"negative", bytes.Replace(full, []byte(", 1"), []byte(", -1"), 1), "not a duration"},
		{"nan", bytes.Replace(full, []byte("\n5, "), []byte("\n5, 1, 1, NaN\n#"), 1), "not a duration"},
		{"no total", regexp.MustCompile(`Total [0-9]+ observations`).ReplaceAll(full, nil), "Total N observations"},
	} {
		stdout, stderr := tc.stdout, []byte(nil)
		if stdout == nil {
			stdout, stderr = recorded(t, "sockperf-"+tc.name)
		}
		_, err := w.Parse(stdout, stderr)
		if !errors.Is(err, ErrParse) || !strings.Contains(err.Error(), tc.mention) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: err = %v, want ErrParse mentioning %q on one line", tc.name, err, tc.mention)
		}
	}
}

// The recordings are real, so their sizes are what the agent must keep:
// a 1-second UDP run on a veth pair already approaches the default limit.
func TestSockperfAsksForRoomForItsFullLog(t *testing.T) {
	stdout, _ := recorded(t, "sockperf-udp")
	valid := 0.55 // seconds sockperf counts in a 1 s run: less its 400 ms warm-up and its tail
	perSecond := float64(len(stdout)) / valid
	ne, err := networked(t, "net-latency").NetCommand(Params{"proto": "udp", "msg_size": "64", "background_streams": "0", "background_direction": "same"}, 3*time.Second, testPeer)
	if err != nil {
		t.Fatal(err)
	}
	if need := int64(3 * perSecond); ne.MaxOutput < need || need < agent.MaxOutput {
		t.Fatalf("MaxOutput = %d for 3 s, need at least %d at the recorded rate (agent default %d)", ne.MaxOutput, need, agent.MaxOutput)
	}
	if long := fullLogOutput(time.Hour); long != agent.MaxOutputLimit {
		t.Errorf("an hour asks for %d, want the agent's ceiling %d", long, agent.MaxOutputLimit)
	}
	if short := fullLogOutput(0); short < agent.MaxOutput {
		t.Errorf("the shortest run asks for %d, less than the default %d", short, agent.MaxOutput)
	}
	tp, _ := networked(t, "net-throughput").NetCommand(networked(t, "net-throughput").Defaults(), 3*time.Second, testPeer)
	if tp.MaxOutput != 0 {
		t.Errorf("iperf3 asks for %d bytes of output; its JSON is small", tp.MaxOutput)
	}
}

// cutMiddle drops the whole lines of b that lie between its first head
// bytes and its last tail bytes, as the agent cuts a too long output.
func cutMiddle(b []byte, head, tail int) []byte {
	h := b[:bytes.LastIndexByte(b[:head], '\n')+1]
	t := b[len(b)-tail:]
	t = t[bytes.IndexByte(t, '\n')+1:]
	return append(append([]byte{}, h...), t...)
}

// sockperf in a gVisor guest on the host's network stops at its first
// receive; that guest cannot run it, which is no failure of each step.
func TestSockperfSaysAGuestRefusesItsReceives(t *testing.T) {
	w := mustLookup(t, "net-latency")
	stdout, stderr := recorded(t, "sockperf-tcp-gvisor")
	if err := w.(Explainer).Explain(stdout, stderr); !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "recvfrom() (EINVAL)") {
		t.Errorf("explained as %v", err)
	}
	if _, err := w.Parse(stdout, stderr); !errors.Is(err, ErrNotSupported) {
		t.Errorf("parsed as %v", err)
	}
	ok, okErr := recorded(t, "sockperf-tcp-bg")
	if err := w.(Explainer).Explain(ok, okErr); err != nil {
		t.Errorf("a good run explained as %v", err)
	}
}

// TestServersListenWhereTold: on a remote peer (Listen.Only) every server
// of the built-in workloads binds to the address its client reaches, and
// nowhere else; elsewhere they listen on every address as before. A
// user's server gets that address as {peer}, to bind to as it sees fit.
func TestServersListenWhereTold(t *testing.T) {
	addr := testPeer.Addr.String()
	for _, tc := range []struct {
		workload string
		params   Params
	}{
		{"net-throughput", nil},
		{"net-latency", Params{"proto": "udp"}},
		{"net-latency", Params{"proto": "tcp", "background_streams": "1"}},
	} {
		w := networked(t, tc.workload)
		p := merge(w.Defaults(), tc.params)
		for _, only := range []bool{true, false} {
			for _, s := range w.Servers(p, Listen{Addr: testPeer.Addr, Port: testPeer.Port, Only: only}) {
				flag := map[string]string{"iperf3": "-B", "sockperf": "-i"}[s.Argv[0]]
				i := slicesIndex(s.Argv, flag)
				bound := i >= 0 && i+1 < len(s.Argv) && s.Argv[i+1] == addr
				if bound != only || (!only && i >= 0) {
					t.Errorf("%s %v, only %v: server %s argv %q", tc.workload, tc.params, only, s.Name, s.Argv)
				}
			}
		}
	}
	nw := networked(t, "net-command")
	p := merge(merge(nw.Defaults(), iperf3JSONParams), Params{"server": `["iperf3","-s","-B","{peer}","-p","{port}"]`})
	servers := nw.Servers(p, Listen{Addr: testPeer.Addr, Port: testPeer.Port})
	if len(servers) != 1 || strings.Join(servers[0].Argv, " ") != "iperf3 -s -B "+addr+" -p 20004" {
		t.Errorf("net-command's servers %+v, want {peer} and {port} replaced", servers)
	}
}
