package qemu

import (
	"context"
	"os"
	"testing"

	"github.com/vfleet/vfleet/internal/guest"
)

// A guest without libvirt is started by vfleet's own QEMU, which boots it
// or resumes its template as its launch says, and dials nothing.
func TestLauncherOfAGuestWithoutLibvirt(t *testing.T) {
	k, _ := guest.Lookup(KindName)
	env := guest.Env{StateDir: "/var/lib/vfleet/runs/r/state"}
	for _, launch := range []string{LaunchBoot, LaunchClone} {
		g, err := k.New(guest.Spec{Name: "v", Launch: launch}, env)
		if err != nil {
			t.Fatal(err)
		}
		var undo guest.Teardown
		l, err := g.(*Guest).launcher(context.Background(), &undo)
		if err != nil {
			t.Fatal(err)
		}
		_, clone := l.(*cloneLauncher)
		_, direct := l.(*directLauncher)
		if clone != (launch == LaunchClone) || direct != (launch == LaunchBoot) {
			t.Errorf("launch %s: launcher %T", launch, l)
		}
		if err := undo.Run(); err != nil {
			t.Error(err)
		}
	}
}

// QEMU's descriptors are numbered from 3 in the order they are handed to
// it, which is how a clone's state and card are named on its command line.
func TestInheritedFilesAreNumberedFromThree(t *testing.T) {
	var s launch
	defer s.closeExtra()
	for want := 3; want < 6; want++ {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.inherit(f); got != want {
			t.Errorf("descriptor %d, want %d", got, want)
		}
	}
}
