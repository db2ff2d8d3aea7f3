package workload

import "testing"

func TestRoleOf(t *testing.T) {
	for _, c := range []struct {
		workload, metric string
		want             Role
	}{
		{"stream", "copy_mbps", RolePerformance},
		{"fio", "read_clat_p99", RolePerformance},
		{LaunchWorkload, "launch.ready_s", RoleFootprint},
		{DensityWorkload, "density.guest_private_bytes", RoleFootprint},
		{"stream", TotalPrefix + "copy_mbps", RoleFleet},
		{"stream", MetricOverlap, RoleFleet},
		{"stream", MetricStartSkew, RoleFleet},
		{"stream", MetricFirstRunSpread, RoleFleet},
		// A workload's own metric under a "fleet." name is still its own.
		{"stream", "fleet.other", RolePerformance},
	} {
		if got := RoleOf(c.workload, c.metric); got != c.want {
			t.Errorf("RoleOf(%q, %q) = %q, want %q", c.workload, c.metric, got, c.want)
		}
	}
}
