package guest

// Runtimed is implemented by a kind whose guests run under one of several
// runtimes (Spec.Runtime) that differ in what they can do: the
// conformance suite runs the kind under each runtime its Probe accepts,
// not only its default, and checks each against its own Traits.
type Runtimed interface {
	// Runtimes lists the runtimes the kind knows, its default first.
	Runtimes() []string
	// RuntimeTraits are the Traits of the kind's guests under runtime
	// (TraitsOf asks them for a spec of the kind); its Security a subset
	// of the kind's.
	RuntimeTraits(runtime string) Traits
}

// KernelDetail is the Info.Details key that names the kernel a guest's
// processes run on when it is neither the host's nor a VM's own, which
// the probes inside the guest cannot tell apart: KernelGVisor.
const KernelDetail = "kernel"

// KernelGVisor: the guest's processes run on gVisor's application kernel,
// a host process that serves their system calls on the host's kernel.
const KernelGVisor = "gvisor"
