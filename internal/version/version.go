// Package version holds the version vfleet and its agent report. Release
// builds set Version with -ldflags "-X github.com/vfleet/vfleet/internal/version.Version=...".
package version

import "runtime/debug"

// Version is overridden at link time by release builds.
var Version = ""

// String is the version to report: the link-time version, else the VCS
// revision Go embedded in the binary, else "dev".
func String() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "dev-" + s.Value[:12]
			}
		}
	}
	return "dev"
}
