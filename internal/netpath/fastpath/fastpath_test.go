package fastpath

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// cReasonNames maps the identifiers of enum fp_reason to their Go names.
var cReasonNames = map[string]string{
	"FP_REDIRECTED":            "redirected",
	"FP_REDIRECTED_NEIGH":      "redirected_neigh",
	"FP_DROPPED":               "dropped",
	"FP_PASS_NOT_IPV4":         "not_ipv4",
	"FP_PASS_MALFORMED":        "malformed",
	"FP_PASS_FRAGMENT":         "fragment",
	"FP_PASS_TTL":              "ttl_expiring",
	"FP_PASS_FIB_NOT_FWDED":    "fib_not_forwarded",
	"FP_PASS_FIB_NO_NEIGH":     "fib_no_neigh",
	"FP_PASS_FIB_FRAG_NEEDED":  "fib_frag_needed",
	"FP_PASS_FIB_FWD_DISABLED": "fib_forwarding_disabled",
	"FP_PASS_FIB_UNREACHABLE":  "fib_unreachable",
	"FP_PASS_FIB_OTHER":        "fib_other",
	"FP_PASS_NOT_OURS":         "egress_not_ours",
}

// The Go names must follow the C enum entry by entry: the enum's value is
// the counters map index.
func TestReasonNamesFollowTheCEnum(t *testing.T) {
	src, err := os.ReadFile("bpf/fwd.h")
	if err != nil {
		t.Fatal(err)
	}
	body := regexp.MustCompile(`(?s)enum fp_reason \{(.*?)\};`).FindSubmatch(src)
	if body == nil {
		t.Fatal("no enum fp_reason in bpf/fwd.h")
	}
	var idents []string
	for _, m := range regexp.MustCompile(`(?m)^\s*(FP_[A-Z0-9_]+)`).FindAllSubmatch(body[1], -1) {
		idents = append(idents, string(m[1]))
	}
	if len(idents) == 0 || idents[len(idents)-1] != "FP_REASON_MAX" {
		t.Fatalf("enum fp_reason entries %v do not end with FP_REASON_MAX", idents)
	}
	idents = idents[:len(idents)-1]
	if len(idents) != len(reasonNames) {
		t.Fatalf("C has %d reasons %v, Go names %d", len(idents), idents, len(reasonNames))
	}
	for i, id := range idents {
		if cReasonNames[id] != reasonNames[i] {
			t.Errorf("reason %d is %s in C, %q in Go (want %q)", i, id, reasonNames[i], cReasonNames[id])
		}
	}
	for idx, id := range map[int]string{reasonRedirected: "FP_REDIRECTED", reasonRedirectedNeigh: "FP_REDIRECTED_NEIGH", reasonDropped: "FP_DROPPED", firstPassReason: "FP_PASS_NOT_IPV4"} {
		if idents[idx] != id {
			t.Errorf("Go index %d is %s in C, want %s", idx, idents[idx], id)
		}
	}
}

// The embedded objects are what Load relies on, readable without a kernel.
func TestEmbeddedObjects(t *testing.T) {
	for _, tc := range []struct {
		load  func() (*ebpf.CollectionSpec, error)
		progs map[string]ebpf.ProgramType
		maps  map[string]ebpf.MapType
	}{
		{loadXdp, map[string]ebpf.ProgramType{"vfleet_xdp_fwd": ebpf.XDP, "vfleet_xdp_pass": ebpf.XDP},
			map[string]ebpf.MapType{"fp_counters": ebpf.PerCPUArray, "fp_egress": ebpf.DevMapHash}},
		{loadTc, map[string]ebpf.ProgramType{"vfleet_tc_fwd": ebpf.SchedCLS},
			map[string]ebpf.MapType{"fp_counters": ebpf.PerCPUArray, "fp_veths": ebpf.Hash}},
	} {
		spec, err := tc.load()
		if err != nil {
			t.Fatal(err)
		}
		if len(spec.Programs) != len(tc.progs) || len(spec.Maps) != len(tc.maps) {
			t.Errorf("objects hold programs %s and maps %s", keys(spec.Programs), keys(spec.Maps))
		}
		for name, typ := range tc.progs {
			if p := spec.Programs[name]; p == nil || p.Type != typ {
				t.Errorf("program %s: %v, want type %v", name, p, typ)
			}
		}
		for name, typ := range tc.maps {
			if m := spec.Maps[name]; m == nil || m.Type != typ {
				t.Errorf("map %s: %v, want type %v", name, m, typ)
			}
		}
		if m := spec.Maps["fp_counters"]; m != nil && int(m.MaxEntries) != len(reasonNames) {
			t.Errorf("fp_counters has %d entries, %d reasons are named", m.MaxEntries, len(reasonNames))
		}
	}
}

func TestLoadRejectsUnknownMode(t *testing.T) {
	_, err := Load("ebpf")
	if err == nil || errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), `"ebpf"`) || !strings.Contains(err.Error(), "xdp, tc") {
		t.Fatalf("Load(ebpf) = %v, want an error naming the mode and the known ones", err)
	}
}

func TestSumCountersRecorded(t *testing.T) {
	b, err := os.ReadFile("testdata/percpu-xdp.json")
	if err != nil {
		t.Fatal(err)
	}
	var perCPU [][]uint64
	if err := json.Unmarshal(b, &perCPU); err != nil {
		t.Fatal(err)
	}
	c, err := sumCounters(perCPU)
	if err != nil {
		t.Fatal(err)
	}
	if c.Redirected != 1422 || c.RedirectedNeigh != 0 || c.Passed != 4 || c.Dropped != 0 {
		t.Errorf("counters = %v", c)
	}
	if len(c.PassedByReason) != len(reasonNames)-firstPassReason || c.PassedByReason["not_ipv4"] != 4 {
		t.Errorf("passed by reason = %v", c.PassedByReason)
	}
}

func TestSumCounters(t *testing.T) {
	perCPU := make([][]uint64, len(reasonNames))
	for i := range perCPU {
		perCPU[i] = []uint64{0, 0, 0}
	}
	perCPU[reasonRedirected] = []uint64{10, 20, 30}
	perCPU[reasonRedirectedNeigh] = []uint64{1, 0, 2}
	perCPU[reasonDropped] = []uint64{0, 5, 0}
	perCPU[firstPassReason] = []uint64{7, 0, 0}       // not_ipv4
	perCPU[len(reasonNames)-1] = []uint64{0, 0, 9}    // egress_not_ours
	perCPU[firstPassReason+5] = []uint64{100, 0, 100} // fib_no_neigh
	c, err := sumCounters(perCPU)
	if err != nil {
		t.Fatal(err)
	}
	if c.Redirected != 63 || c.RedirectedNeigh != 3 || c.Dropped != 5 || c.Passed != 216 {
		t.Errorf("counters = %+v", c)
	}
	for name, want := range map[string]uint64{"not_ipv4": 7, "egress_not_ours": 9, "fib_no_neigh": 200, "fragment": 0} {
		if got, ok := c.PassedByReason[name]; !ok || got != want {
			t.Errorf("passed %s = %d (present %v), want %d", name, got, ok, want)
		}
	}
	if got, want := c.String(), "redirected 63, passed 216, dropped 5 (egress_not_ours 9, fib_no_neigh 200, not_ipv4 7)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	d := c.Sub(Counters{Redirected: 60, Passed: 16, PassedByReason: map[string]uint64{"fib_no_neigh": 200}})
	if d.Redirected != 3 || d.Passed != 200 || d.Dropped != 5 || d.PassedByReason["fib_no_neigh"] != 0 || d.PassedByReason["not_ipv4"] != 7 {
		t.Errorf("Sub = %+v", d)
	}
	if got := (Counters{}).String(); got != "redirected 0, passed 0, dropped 0" {
		t.Errorf("zero String() = %q", got)
	}
	if _, err := sumCounters(perCPU[:3]); err == nil {
		t.Error("a counters map of the wrong size was summed")
	}
}

func TestOffloadsFormat(t *testing.T) {
	var none offloads
	if none.String() != "unknown" {
		t.Errorf("nil offloads = %q", none.String())
	}
	before := offloads{"rx-checksumming": true, "tx-checksumming": true, "scatter-gather": true, "tcp-segmentation-offload": true, "generic-segmentation-offload": true}
	after := offloads{"rx-checksumming": true, "tx-checksumming": false, "scatter-gather": true, "tcp-segmentation-offload": false, "generic-segmentation-offload": true}
	if got, want := after.String(), "rx-checksumming=on tx-checksumming=off scatter-gather=on tcp-segmentation-offload=off generic-segmentation-offload=on generic-receive-offload=unknown"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := after.changes(before), "tx-checksumming on->off, tcp-segmentation-offload on->off"; got != want {
		t.Errorf("changes = %q, want %q", got, want)
	}
	if got := after.changes(nil); got != "" {
		t.Errorf("changes from unknown = %q, want none", got)
	}
}

// offloadsOf parses String's format back, for test inputs.
func offloadsOf(t *testing.T, s string) offloads {
	t.Helper()
	o := offloads{}
	for _, kv := range strings.Fields(s) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || (v != "on" && v != "off") {
			t.Fatalf("bad offload %q", kv)
		}
		o[k] = v == "on"
	}
	return o
}

func TestDescribeGolden(t *testing.T) {
	const (
		untouched = "rx-checksumming=on tx-checksumming=on scatter-gather=on tcp-segmentation-offload=on generic-segmentation-offload=on generic-receive-offload=off"
		hostXDP   = "rx-checksumming=on tx-checksumming=on scatter-gather=on tcp-segmentation-offload=off generic-segmentation-offload=on generic-receive-offload=off"
		farXDP    = "rx-checksumming=on tx-checksumming=off scatter-gather=on tcp-segmentation-offload=off generic-segmentation-offload=on generic-receive-offload=off"
	)
	hs := &space{key: nsKey{ino: 4026532317}}
	pair := func(host string, hostIndex int, farIno uint64) []*iface {
		h := &iface{sp: hs, name: host, index: hostIndex, hook: hookXDPDriver, progName: "vfleet_xdp_fwd",
			before: offloadsOf(t, untouched), after: offloadsOf(t, hostXDP)}
		f := &iface{sp: &space{key: nsKey{ino: farIno}}, name: "eth0", index: 2, far: true, hook: hookXDPDriver,
			progName: "vfleet_xdp_pass", txCsumOff: true, before: offloadsOf(t, untouched), after: offloadsOf(t, farXDP)}
		h.peer, f.peer = f, h
		return []*iface{f, h}
	}
	ifaces := append(pair("up0", 2, 4026532386), pair("g0", 3, 4026532455)...)
	ifaces = append(ifaces, &iface{sp: hs, name: "g1", index: 4, hook: hookNone}) // offloads unreadable
	ifaces[len(ifaces)-1].peer = &iface{name: "eth0"}
	ifaces = append(ifaces, &iface{sp: hs, name: "x0", index: 5, tap: true, hook: hookXDPDriver, progName: "vfleet_xdp_fwd",
		before: offloadsOf(t, untouched), after: offloadsOf(t, untouched)})
	// A NIC whose driver has no XDP: generic mode, and the guests'
	// programs leave its frames to the stack.
	nic := &iface{sp: hs, name: "lab0", index: 6, nic: true, hook: hookXDPGeneric, progName: "vfleet_xdp_fwd",
		before: offloadsOf(t, untouched), after: offloadsOf(t, untouched)}
	nic.sendsTo = (&Set{}).nicRedirect(nic)
	ifaces = append(ifaces, nic)
	got := describe(XDP, []progDesc{{"vfleet_xdp_fwd", 158, "34bc92cf1c4c75fa"}, {"vfleet_xdp_pass", 159, "614b434cd8324ecc"}}, ifaces)
	b, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	const golden = "testdata/describe.golden"
	if *update {
		if err := os.WriteFile(golden, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != string(want) {
		t.Errorf("Describe differs from %s (go test -update to accept):\n%s", golden, b)
	}
}

func TestParseForwDatagramsRecorded(t *testing.T) {
	snmp, err := os.ReadFile("testdata/snmp-hs")
	if err != nil {
		t.Fatal(err)
	}
	n, err := parseForwDatagrams(snmp)
	if err != nil || n != 112 {
		t.Fatalf("ForwDatagrams = %d, %v; want 112", n, err)
	}
	if _, err := parseForwDatagrams([]byte("Icmp: InMsgs\nIcmp: 0\n")); err == nil {
		t.Fatal("snmp without Ip lines parsed")
	}
}
