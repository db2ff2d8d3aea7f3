// Package lxc implements the "lxc" guest kind: a system container run by
// LXC 5.0, the isolation the container study measured, beside the OCI
// containers of kind container.
//
// It is a kind of its own rather than a runtime of kind container because
// LXC is not an OCI runtime: it reads no bundle, it has its own
// configuration language (and its own defaults in
// /usr/share/lxc/config/common.conf), its own tools (lxc-start, lxc-stop,
// lxc-info) and its own life cycle, with a monitor process that stays
// beside every running container. vfleet drives it through those tools,
// without cgo, with a configuration file it writes for each guest in a
// per-guest LXC path under the guest's state directory (`lxc-start -P`),
// so nothing lands in /var/lib/lxc.
//
// The container's root is the guest's own copy-on-write overlay of the
// image and its init is vfleet's agent (lxc.init.cmd), which listens on a
// unix socket in a directory bind-mounted from the host. On a run's
// network the container joins the guest's namespace that the run's data
// path wired (lxc.namespace.share.net), so every data path works for it
// as for any namespace guest; LXC's own veth or macvlan would make a
// second attachment that bypasses vfleet's data paths and addressing.
// Without a network it has loopback only (lxc.net.0.type = empty).
//
// Lifecycle: Start records then creates the state directory, the overlay,
// the container's and its monitor's cgroups (/vfleet/RUN/GUEST and
// /vfleet/RUN/GUEST.monitor, and the lxc.pivot below the container's that
// LXC moves its monitor into at its end) and the container, daemonized,
// and waits for the agent. Stop kills the container (lxc-stop -k), then
// whatever is left in those cgroups, and undoes the rest. Everything a killed vfleet
// leaves is found through the ledger by `vfleet clean`.
package lxc
