package guest

import "context"

// SpecProber is a Kind that can only tell whether this host runs a group
// from the group's whole spec and its image, beyond what Probe learns from
// the runtime: a VM that asks for KVM, which only booting a kernel shows.
// ProbeSpec runs once the image is ready and before any guest starts; a
// host that cannot run the spec gets an error wrapping ErrNotSupported
// that says why. It changes nothing on the host but caches.
type SpecProber interface {
	ProbeSpec(ctx context.Context, spec Spec, env Env) error
}
