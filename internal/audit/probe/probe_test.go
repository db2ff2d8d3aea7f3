package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
)

func TestPartitionsAndRootMountParse(t *testing.T) {
	parts := "major minor  #blocks  name\n\n 254        0  268435456 vda\n 254        1     1024 vda1\n   7        0    4096 loop0\n"
	if got := PartitionNames(parts); strings.Join(got, ",") != "vda,vda1,loop0" {
		t.Errorf("partitions = %v", got)
	}
	info := "22 1 0:20 / / rw - overlay overlay rw,lowerdir=/a,upperdir=/b\n23 22 0:5 / /proc rw - proc proc rw\n" +
		"40 22 0:30 / / rw - ext4 /dev/vda rw\n"
	if got := rootMount(info); !strings.Contains(got, "ext4 /dev/vda") {
		t.Errorf("root mount = %q, want the last mount at /", got)
	}
}

// The probes of this test process: what it holds is the test's business,
// but every probe must have answered, and a refused handshake on loopback
// counts as reached. (An unreached address is tested where a run's network
// exists: a macvlan guest and its host side.)
func TestCollectAnswersEveryProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	open := l.Addr().String()
	l.Close() // nothing listens there now: the kernel refuses at once
	ev := Collect(context.Background(), map[string]string{"closed": open})
	if ev.Reach["closed"] != Reachable {
		t.Errorf("a refused handshake on loopback = %q, want %q", ev.Reach["closed"], Reachable)
	}
	if !strings.Contains(ev.Status, "CapEff:") || ev.BootID == "" || ev.Namespaces["net"] == "" || ev.Processes == 0 || ev.Keyctl == "" {
		t.Errorf("evidence incomplete: %+v", ev)
	}
	for _, d := range probedDevices {
		if ev.Devices[d] == "" {
			t.Errorf("device %s not probed", d)
		}
	}
	for _, s := range probedSettings {
		if ev.Writable[s] == "" {
			t.Errorf("setting %s not probed", s)
		}
	}
}

func TestRunProbeTakesNamedTargetsOnly(t *testing.T) {
	var out bytes.Buffer
	if err := RunProbe([]string{"no-equals-sign"}, &out); err == nil {
		t.Error("a target without NAME= was accepted")
	}
	if err := RunProbe(nil, &out); err != nil {
		t.Fatal(err)
	}
	var ev Evidence
	if err := json.Unmarshal(out.Bytes(), &ev); err != nil || ev.Status == "" {
		t.Errorf("output is not evidence: %v\n%s", err, out.String())
	}
}
