package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"testing"
)

func TestMountPointsRecorded(t *testing.T) {
	f, err := os.Open("testdata/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	points, err := MountPoints(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(points) != 6 || points[0] != "/proc" || points[5] != "/var/lib/with space" {
		t.Fatalf("points = %q", points)
	}
}

// The leak check must be able to fail: a child started after the snapshot
// is reported until it is gone.
func TestLeakCheckSeesNewChildren(t *testing.T) {
	before := TakeSnapshot(t)
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if leaks := Leaks(t, before); !slices.Contains(leaks, fmt.Sprintf("process %d (sleep)", cmd.Process.Pid)) {
		t.Fatalf("leaks = %q, want the live child among them", leaks)
	}
	if leaks := added("x", map[string]bool{"a": true}, map[string]bool{"a": true, "b": true}); len(leaks) != 1 || leaks[0] != "x b" {
		t.Fatalf("added = %q", leaks)
	}
	cmd.Process.Kill()
	cmd.Wait()
	CheckLeaks(t, before)
}
