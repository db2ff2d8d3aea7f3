package nsthread

import (
	"errors"
	"os"
	"testing"

	"github.com/vishvananda/netns"
)

// inode names the namespace the calling thread is in.
func inode(t *testing.T) string {
	t.Helper()
	l, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestDoRunsInsideAndComesBack(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	var created netns.NsHandle
	var inside, mine string
	mine = inode(t)
	// A namespace made by fn itself: Do must bring the thread back.
	if err := Do(netns.None(), func() (err error) {
		created, err = netns.New()
		inside = inode(t)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer created.Close()
	if inside == mine {
		t.Fatal("fn did not run in the namespace it created")
	}
	var again string
	if err := Do(created, func() error { again = inode(t); return nil }); err != nil {
		t.Fatal(err)
	}
	if again != inside {
		t.Fatalf("Do(target) ran in %s, want %s", again, inside)
	}
	// Every thread the runtime hands out afterwards is back home.
	for i := 0; i < 20; i++ {
		if got := inode(t); got != mine {
			t.Fatalf("a thread was left in %s", got)
		}
	}
	want := errors.New("fn failed")
	if err := Do(created, func() error { return want }); !errors.Is(err, want) {
		t.Fatalf("Do lost fn's error: %v", err)
	}
	if err := DoPath("/nonexistent/ns", func() error { return nil }); err == nil {
		t.Fatal("DoPath of a missing namespace succeeded")
	}
}
