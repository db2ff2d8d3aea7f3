package lxc

import "github.com/vfleet/vfleet/internal/doctor"

// DoctorChecks: LXC's tools, found with their version.
func (kind) DoctorChecks(doctor.Options) []doctor.Check {
	return []doctor.Check{doctor.ToolCheck("lxc", "lxc-start", "LXC system containers, kind lxc")}
}
