package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// UserHZ is the unit of the CPU times in /proc/stat and /proc/PID/stat:
// clock ticks of 1/100 s, fixed by the kernel's user ABI on every
// architecture, whatever its internal HZ.
const UserHZ = 100

// ErrFormat is returned for a stat text that is not in the kernel's format.
var ErrFormat = errors.New("malformed /proc/PID/stat")

// Stat holds the fields of /proc/PID/stat that vfleet uses. CPU and start
// times are in clock ticks (USER_HZ).
type Stat struct {
	State     byte
	PPID      int
	UTime     uint64
	STime     uint64
	CUTime    uint64 // of the children the process has waited for
	CSTime    uint64
	StartTime uint64 // since boot; with the pid it identifies the process
}

// ParseStat parses a /proc/PID/stat text. The command name (field 2) is in
// parentheses and may itself hold spaces and parentheses, so the fields
// are counted from the last ')'.
func ParseStat(b []byte) (Stat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, fmt.Errorf("%w: no command name", ErrFormat)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); field N is f[N-3].
	if len(f) < 20 || len(f[0]) != 1 {
		return Stat{}, fmt.Errorf("%w: %d fields after the command name, want at least 20", ErrFormat, len(f))
	}
	s := Stat{State: f[0][0]}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return Stat{}, fmt.Errorf("%w: ppid %q", ErrFormat, f[1])
	}
	s.PPID = ppid
	// cutime and cstime are signed in the kernel's format, but never negative.
	for j, dst := range []*uint64{&s.UTime, &s.STime, &s.CUTime, &s.CSTime} {
		n, err := strconv.ParseInt(f[11+j], 10, 64)
		if err != nil || n < 0 {
			return Stat{}, fmt.Errorf("%w: cpu time %q", ErrFormat, f[11+j])
		}
		*dst = uint64(n)
	}
	if s.StartTime, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return Stat{}, fmt.Errorf("%w: start time %q", ErrFormat, f[19])
	}
	return s, nil
}

// ReadStat reads and parses /proc/PID/stat.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(b)
}

// Running says whether the process runs: a zombie has exited and only
// waits to be reaped, which on a host whose init does not reap orphans may
// be forever.
func (s Stat) Running() bool { return s.State != 'Z' && s.State != 'X' }

// CPUTicks is the CPU time of the process and of the children it has
// waited for.
func (s Stat) CPUTicks() uint64 { return s.UTime + s.STime + s.CUTime + s.CSTime }

// Process identifies one process for as long as it lives.
type Process struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
}

// Self is the calling process.
func Self() (Process, error) { return Find(os.Getpid()) }

// Find identifies the process that has pid now.
func Find(pid int) (Process, error) {
	st, err := ReadStat(pid)
	if err != nil {
		return Process{}, fmt.Errorf("process %d: %w", pid, err)
	}
	return Process{PID: pid, StartTime: st.StartTime}, nil
}

// Alive says whether the process still runs: its pid exists, belongs to
// the same process (same start time), and is not a zombie.
func (p Process) Alive() bool {
	if p.PID <= 0 {
		return false
	}
	st, err := ReadStat(p.PID)
	return err == nil && st.StartTime == p.StartTime && st.Running()
}
