// Package all compiles in every guest kind vfleet has: importing it
// registers them. The vfleet command imports it, and so does the
// conformance test every registered kind passes, so that no kind reaches
// users without it.
package all

import (
	_ "github.com/vfleet/vfleet/internal/guest/container"
	_ "github.com/vfleet/vfleet/internal/guest/host"
	_ "github.com/vfleet/vfleet/internal/guest/lxc"
	_ "github.com/vfleet/vfleet/internal/guest/pod"
	_ "github.com/vfleet/vfleet/internal/guest/qemu"
)
