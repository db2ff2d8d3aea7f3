package procfs

import (
	"os"
	"testing"
)

// The socket tables and counters come from a network namespace of this
// host or, through its agent, from the network peer.
func TestParseForwardedOnRecordedSNMP(t *testing.T) {
	b, err := os.ReadFile("testdata/net/snmp")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseForwarded(b)
	if err != nil || got != 1240 {
		t.Fatalf("ForwDatagrams = %d, %v; want 1240", got, err)
	}
	if _, err := ParseForwarded([]byte("Tcp: a b\nTcp: 1 2\n")); err == nil {
		t.Fatal("a table without Ip lines parsed")
	}
}

func TestListeningOnRecordedTables(t *testing.T) {
	read := func(names ...string) []byte {
		var all []byte
		for _, n := range names {
			b, err := os.ReadFile("testdata/net/" + n)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, b...)
		}
		return all
	}
	tcp, udp := read("tcp", "tcp6"), read("udp")
	for _, c := range []struct {
		table []byte
		proto string
		port  int
		want  bool
	}{
		{tcp, "tcp", 5201, true},  // iperf3 -s listens on the IPv6 wildcard
		{tcp, "tcp", 11111, true}, // sockperf server --tcp
		{tcp, "tcp", 11112, false},
		{udp, "udp", 11112, true},
		{udp, "udp", 5201, false},
	} {
		got, err := Listening(c.table, c.proto, c.port)
		if err != nil || got != c.want {
			t.Errorf("Listening(%s, %d) = %v, %v; want %v", c.proto, c.port, got, err, c.want)
		}
	}
	if _, err := Listening([]byte("header\ngarbage\n"), "tcp", 1); err == nil {
		t.Fatal("a malformed table parsed")
	}
}
