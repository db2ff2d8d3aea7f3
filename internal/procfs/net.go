package procfs

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// ParseForwarded returns Ip ForwDatagrams from /proc/net/snmp, whose "Ip:"
// lines are a header line of names followed by a line of values.
func ParseForwarded(snmp []byte) (uint64, error) {
	var header []string
	sc := bufio.NewScanner(bytes.NewReader(snmp))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "Ip:" {
			continue
		}
		if header == nil {
			header = fields
			continue
		}
		for i, name := range header {
			if name == "ForwDatagrams" && i < len(fields) {
				return strconv.ParseUint(fields[i], 10, 64)
			}
		}
		break
	}
	return 0, fmt.Errorf("no Ip ForwDatagrams in /proc/net/snmp")
}

// Listening reports whether socket tables (/proc/net/tcp, tcp6, udp or
// udp6 of the namespace, one or several concatenated) have a socket bound to port in the listening state: for
// TCP state 0A (LISTEN), for UDP any bound socket (state 07, unconnected).
func Listening(table []byte, proto string, port int) (bool, error) {
	want := "0A"
	if proto == "udp" {
		want = "07"
	}
	sc := bufio.NewScanner(bytes.NewReader(table))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 && f[0] == "sl" { // a table's column header
			continue
		}
		if len(f) < 4 {
			return false, fmt.Errorf("malformed socket table line %q", sc.Text())
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		if !ok {
			return false, fmt.Errorf("malformed local address %q", f[1])
		}
		p, err := strconv.ParseUint(hexPort, 16, 16)
		if err != nil {
			return false, fmt.Errorf("malformed local port %q", hexPort)
		}
		if int(p) == port && f[3] == want {
			return true, nil
		}
	}
	return false, sc.Err()
}
