package guest

// Runtimed is implemented by a kind whose guests run under one of several
// runtimes (Spec.Runtime) that differ in what they can do: the
// conformance suite runs the kind under each runtime its Probe accepts,
// not only its default, and checks each against its own Traits.
type Runtimed interface {
	// Runtimes lists the runtimes the kind knows, its default first.
	Runtimes() []string
	// RuntimeTraits are the Traits of the kind's guests under runtime;
	// its Security a subset of the kind's.
	RuntimeTraits(runtime string) Traits
}
