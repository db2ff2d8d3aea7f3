package container

import "github.com/vfleet/vfleet/internal/doctor"

// DoctorChecks: each runtime the kind knows, found and really starting a
// container (a runtime can be installed and still refuse this host's
// cgroups).
func (k kind) DoctorChecks(o doctor.Options) []doctor.Check {
	var checks []doctor.Check
	for _, rt := range Runtimes() {
		checks = append(checks, doctor.RuntimeCheck(o, rt, k.Probe))
	}
	return checks
}
