package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// image inspect names every program a workload runs that the image
// lacks, not only its first.
func TestPrintRunnableNamesEveryMissingProgram(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(root, "usr", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "sockperf"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printRunnable(&out, root)
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "net-latency ") {
			if !strings.Contains(line, "sockperf, iperf3") || !strings.Contains(line, "no iperf3: steps of this workload fail") {
				t.Errorf("net-latency line = %q, want both programs and iperf3 named missing", line)
			}
			return
		}
	}
	t.Fatalf("no net-latency line in:\n%s", out.String())
}
