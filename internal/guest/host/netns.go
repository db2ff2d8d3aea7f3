package host

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"

	"github.com/vishvananda/netns"
)

// startIn starts cmd inside the network namespace at nsPath (the host's
// own when empty). A child inherits the namespace of the thread that forks
// it, so the fork happens on a thread moved there for the purpose.
//
// The thread must outlive the child: the agent's parent-death signal fires
// when the forking thread exits. So the thread is moved back and returned
// to the runtime; only if moving back fails does it stay locked and get
// retired — and the child, then killed by that signal, is reported failed.
func startIn(nsPath string, cmd *exec.Cmd) error {
	if nsPath == "" {
		return cmd.Start()
	}
	target, err := netns.GetFromPath(nsPath)
	if err != nil {
		return fmt.Errorf("open network namespace %s: %w", nsPath, err)
	}
	defer target.Close()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("open the current network namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(target); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("enter network namespace %s: %w", nsPath, err)
			return
		}
		startErr := cmd.Start()
		if err := netns.Set(orig); err != nil {
			done <- errors.Join(startErr, fmt.Errorf("leave network namespace %s: %w", nsPath, err))
			return
		}
		runtime.UnlockOSThread()
		done <- startErr
	}()
	return <-done
}
