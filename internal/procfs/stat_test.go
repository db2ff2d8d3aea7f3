package procfs

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestParseStatRecorded(t *testing.T) {
	for name, want := range map[string]Stat{
		"stat-odd-name":    {State: 'S', PPID: 18513, StartTime: 1106143},
		"stat-busy-parent": {State: 'S', PPID: 18549, UTime: 23, CUTime: 13, CSTime: 1, StartTime: 1106630},
	} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseStat(b)
		if err != nil || got != want {
			t.Errorf("%s: %+v, %v; want %+v", name, got, err, want)
		}
	}
}

func TestParseStatRefusesMalformed(t *testing.T) {
	for _, bad := range []string{
		"",
		"1 sleep S 1 2 3",
		"1 (sleep) S 1 2 3",
		"1 (a) S 1 1 1 0 -1 0 0 0 0 0 x 0 0 0 20 0 1 0 5",
		"1 (a) S 1 1 1 0 -1 0 0 0 0 0 0 0 -1 0 20 0 1 0 5",
		"1 (a) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 -5",
		"1 (a) SS 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5",
	} {
		if _, err := ParseStat([]byte(bad)); !errors.Is(err, ErrFormat) {
			t.Errorf("%q: err %v, want ErrFormat", bad, err)
		}
	}
}

func TestStatRunning(t *testing.T) {
	for state, want := range map[byte]bool{'S': true, 'R': true, 'D': true, 'Z': false, 'X': false} {
		if got := (Stat{State: state}).Running(); got != want {
			t.Errorf("state %c: running %v, want %v", state, got, want)
		}
	}
}

func TestProcessAlive(t *testing.T) {
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if !self.Alive() {
		t.Fatal("this process is not alive")
	}
	if (Process{PID: self.PID, StartTime: self.StartTime + 1}).Alive() {
		t.Error("a pid with another start time (a reused pid) counts as alive")
	}
	if (Process{}).Alive() {
		t.Error("pid 0 counts as alive")
	}
	// A child that has exited but is not reaped yet is a zombie: dead.
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start true: %v", err)
	}
	p, err := Find(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	for st, err := ReadStat(p.PID); err == nil && st.Running(); st, err = ReadStat(p.PID) {
	}
	if p.Alive() {
		t.Error("a zombie counts as alive")
	}
	_ = cmd.Wait()
	if p.Alive() {
		t.Error("a reaped process counts as alive")
	}
}
