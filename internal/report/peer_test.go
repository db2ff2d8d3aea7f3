package report

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/store"
)

// withPeer is a run measured against a remote peer described by fp.
func withPeer(t *testing.T, url string, fp hostinfo.Fingerprint) store.Run {
	t.Helper()
	b, err := json.Marshal(fp)
	if err != nil {
		t.Fatal(err)
	}
	return store.Run{ID: 1, ScenarioName: "lab", Baseline: "host", Host: hostinfo.Fingerprint{Hostname: "here", Kernel: "6.1.0"},
		Guests: map[string]store.GuestRecord{"peer": {Group: "peer", Kind: "remote",
			Details: map[string]string{store.DetailPeerURL: url, store.DetailPeerFingerprint: string(b)}}}}
}

var labPeer = hostinfo.Fingerprint{Hostname: "lab2", Kernel: "6.1.0-18-amd64", CPUModel: "EPYC 7302",
	NIC:          &hostinfo.NIC{Name: "enp1s0f0", Driver: "mlx5_core", Version: "6.1.0", Firmware: "16.35.2000", Offloads: map[string]string{"tcp-segmentation-offload": "on", "generic-receive-offload": "on", "large-receive-offload": "off [fixed]"}},
	ToolVersions: map[string]string{"sockperf": "3.10-1"}}

// The run's page describes a remote peer as it describes the host, NIC
// included; a run with the local peer has no such section.
func TestHTMLShowsTheRemotePeer(t *testing.T) {
	run := withPeer(t, "ssh://root@192.0.2.10:22", labPeer)
	var buf bytes.Buffer
	if err := WriteHTML(&buf, Build(run, nil, nil), nil); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{"<h2>Network peer</h2>", "ssh://root@192.0.2.10:22", "lab2", "EPYC 7302",
		"enp1s0f0 · mlx5_core 6.1.0 · firmware 16.35.2000 · offloads on: generic-receive-offload, tcp-segmentation-offload", "3.10-1"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	buf.Reset()
	run.Guests = nil
	if err := WriteHTML(&buf, Build(run, nil, nil), nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "Network peer") {
		t.Error("a run with the local peer shows a network peer section")
	}
}

// A/B names what differs between the runs' peers as it does between
// their hosts.
func TestRunDifferencesComparePeers(t *testing.T) {
	other := labPeer
	nic := *labPeer.NIC
	nic.Offloads = map[string]string{"generic-receive-offload": "on"}
	other.NIC, other.Kernel = &nic, "6.1.0-21-amd64"
	a, b := withPeer(t, "ssh://root@192.0.2.10:22", labPeer), withPeer(t, "ssh://root@192.0.2.10:22", other)
	want := []string{
		"peer kernel: 6.1.0-18-amd64 → 6.1.0-21-amd64",
		"peer NIC: enp1s0f0 · mlx5_core 6.1.0 · firmware 16.35.2000 · offloads on: generic-receive-offload, tcp-segmentation-offload → enp1s0f0 · mlx5_core 6.1.0 · firmware 16.35.2000 · offloads on: generic-receive-offload",
	}
	if got := runDifferences(a, b); !reflect.DeepEqual(got, want) {
		t.Errorf("runDifferences = %q, want %q", got, want)
	}
	local := a
	local.Guests = nil
	if got, want := runDifferences(local, a), []string{"network peer: this host's namespace → ssh://root@192.0.2.10:22"}; !reflect.DeepEqual(got, want) {
		t.Errorf("runDifferences(local, remote) = %q, want %q", got, want)
	}
	if got := runDifferences(a, a); got != nil {
		t.Errorf("runDifferences of a run with itself = %q", got)
	}
}
