package host

import (
	"os/exec"

	"github.com/vfleet/vfleet/internal/nsthread"
)

// startIn starts cmd inside the network namespace at nsPath (the host's
// own when empty). A child inherits the namespace of the thread that forks
// it, so the fork happens on a thread moved there for the purpose; the
// thread outlives the call, as the agent's parent-death signal requires.
func startIn(nsPath string, cmd *exec.Cmd) error {
	if nsPath == "" {
		return cmd.Start()
	}
	return nsthread.DoPath(nsPath, cmd.Start)
}
