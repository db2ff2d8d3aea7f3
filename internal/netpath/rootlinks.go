package netpath

import (
	"fmt"
	"os"
	"slices"
)

// LinksIntoRoot lists the interfaces of the run's namespaces whose other
// end lies in vfleet's own network namespace, as "namespace/interface".
// No data path makes one, so the list is empty unless something outside
// vfleet wired a run's namespace to the host: it is how the isolation
// audit knows whether a guest could reach the host's own network stack
// without sending a packet there.
func (n *Network) LinksIntoRoot() ([]string, error) {
	// The main thread's namespace: nsthread moves only threads of its own.
	root, err := os.Open("/proc/self/ns/net")
	if err != nil {
		return nil, err
	}
	defer root.Close()
	n.mu.Lock()
	defer n.mu.Unlock()
	var found []string
	for _, ns := range n.all {
		// Listing the links first gives every namespace a link reaches an
		// id here, so the root's id exists if any link leads to it.
		links, err := ns.nl.LinkList()
		if err != nil {
			return nil, fmt.Errorf("links of %s: %w", ns.name, err)
		}
		rootID, err := ns.nl.GetNetNsIdByFd(int(root.Fd()))
		if err != nil {
			return nil, fmt.Errorf("id of the root namespace in %s: %w", ns.name, err)
		}
		if rootID < 0 {
			continue
		}
		for _, l := range links {
			if a := l.Attrs(); a.NetNsID == rootID {
				found = append(found, ns.name+"/"+a.Name)
			}
		}
	}
	slices.Sort(found)
	return found, nil
}
