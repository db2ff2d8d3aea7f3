// Package nsthread runs code on an OS thread inside another network
// namespace. A thread's network namespace decides where the sockets,
// devices and /proc/thread-self/net it touches live, and which namespace a
// forked child starts in; Go moves goroutines between threads, so the
// thread is locked for the duration.
//
// Do moves the thread back before handing it to the runtime again. If that
// fails, the thread stays locked and the runtime retires it with the
// goroutine, so no other goroutine ever runs in the wrong namespace. A
// child started by fn is not affected by the return: a parent-death signal
// fires only when the forking thread exits, and a returned thread lives on.
package nsthread

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// Do runs fn on a thread moved into target. With a target that is not open
// (netns.None()), the thread stays in the caller's namespace: fn may then
// move it itself (creating a namespace), and Do brings it back all the same.
func Do(target netns.NsHandle, fn func() error) error {
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
		if target.IsOpen() {
			if err := netns.Set(target); err != nil {
				runtime.UnlockOSThread()
				done <- fmt.Errorf("enter the network namespace: %w", err)
				return
			}
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			done <- errors.Join(ferr, fmt.Errorf("return to the original network namespace: %w", err))
			return
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
}

// DoPath is Do for the namespace bound at path (a name under /run/netns,
// or /proc/PID/ns/net).
func DoPath(path string, fn func() error) error {
	target, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("open network namespace %s: %w", path, err)
	}
	defer target.Close()
	if err := Do(target, fn); err != nil {
		return fmt.Errorf("in network namespace %s: %w", path, err)
	}
	return nil
}
