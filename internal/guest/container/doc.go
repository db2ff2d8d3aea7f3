// Package container implements the "container" guest kind: an OCI bundle,
// built with the runtime-spec types, over the guest's own copy-on-write
// overlay of the image, run detached by an OCI runtime (runc by default;
// crun, gVisor's runsc and Kata's kata-runtime when installed and working).
// The agent is the container's init and listens on a unix socket in a
// directory bind-mounted from the host.
//
// Lifecycle: Start records then creates, in order, the state directory, the
// overlay, the cgroup and the container, and waits for the agent; it undoes
// its own partial work on failure. Stop kills and deletes the container,
// removes its cgroup, unmounts the overlay and removes the state directory;
// it is idempotent and bounded in time. Everything a killed vfleet leaves
// is found through the ledger by `vfleet clean`.
package container
