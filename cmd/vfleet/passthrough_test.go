package main

import (
	"os"
	"strings"
	"testing"
)

// On a host without an IOMMU (CI's), a scenario that lends a device to a
// VM is refused when it is loaded, at the field, saying what the host
// lacks: a usage error, before any image, network or guest is made.
func TestPassthroughRefusedAtLoadWithoutIOMMU(t *testing.T) {
	if groups, _ := os.ReadDir("/sys/kernel/iommu_groups"); len(groups) > 0 {
		t.Skip("this host has an IOMMU; the refusal needs one without")
	}
	c := newCLI(t)
	_, stderr, code := c.run("run", c.scenario(`name: lent
network:
  path: passthrough
  passthrough: [0000:00:00.0]
guests:
  - kind: host
  - kind: vm
workloads:
  - workload: net-latency
`))
	if code != 2 || !strings.Contains(stderr, "s.yaml:4:16: network.passthrough: passthrough refused: the host has no IOMMU") {
		t.Errorf("exit %d, stderr %q; want 2 and the missing IOMMU at the field", code, stderr)
	}
}
