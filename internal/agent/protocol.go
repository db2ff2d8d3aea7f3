package agent

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Version is the protocol version. Bump it on any incompatible change to the
// messages below; both ends refuse a peer with another version.
// Version 2: executions on one connection run concurrently and are
// answered as they end, matched by id; a request can be cancelled.
const Version = 2

// MaxOutput bounds the stdout and stderr kept per execution, so a runaway
// tool cannot exhaust the host's memory through the agent. Of a longer
// output the agent keeps the beginning and the end (see Cut).
const MaxOutput = 8 << 20

// MaxOutputLimit is the most a Request may raise MaxOutput to. Tools that
// print every observation (sockperf's full log) need more than the default;
// the ceiling still bounds what one reply can cost.
const MaxOutputLimit = 256 << 20

// Operations a Request can ask for.
const (
	OpExec = "exec"
	OpPing = "ping"
	// OpHello asks for the agent's Hello again, which is its answer. A VM's
	// agent serves one virtio-serial port that the host connects to and
	// leaves; when the host leaves and comes back at once, the guest may
	// never see it gone, and the agent, still in the old session, sends no
	// new Hello. A client that waited helloAsk for one asks.
	OpHello = "hello"
	// OpCancel stops the execution whose id is Target; its own reply
	// still comes, saying how it ended.
	OpCancel = "cancel"
	// OpLookPath finds the program Arg as an execution would: the reply's
	// Stdout is its path, or its ExitCode is 1 when the guest has no such
	// program, so a step can say which tool an image lacks before running.
	OpLookPath = "lookpath"
)

// Hello is the first message the agent sends on a new connection.
type Hello struct {
	V            int     `json:"v"`
	AgentVersion string  `json:"agent_version"`
	PID          int     `json:"pid"`
	Hostname     string  `json:"hostname"`
	KernelUptime float64 `json:"kernel_uptime_s"` // guest's /proc/uptime when the agent started
}

// MinTimeout is the shortest timeout a request can carry: TimeoutMS
// counts whole milliseconds, and a shorter one would become 0, no timeout.
const MinTimeout = time.Millisecond

// Request asks the agent to do one thing.
type Request struct {
	V         int      `json:"v"`
	ID        uint64   `json:"id"`
	Op        string   `json:"op"`
	Argv      []string `json:"argv,omitempty"`
	Env       []string `json:"env,omitempty"`
	Dir       string   `json:"dir,omitempty"`
	TimeoutMS int64    `json:"timeout_ms,omitempty"` // 0: none; so at least MinTimeout
	// MaxOutput is how many bytes of stdout and of stderr to keep; 0 means
	// MaxOutput, more than MaxOutputLimit is refused.
	MaxOutput int64 `json:"max_output,omitempty"`
	// StartAtUnixNS, when set, is the moment on the agent's own clock at
	// which to start the process: the host sends it, corrected by each
	// agent's clock offset, to many guests at once so a workload starts
	// everywhere together. A moment already past starts at once; one more
	// than MaxStartDelay ahead is refused.
	StartAtUnixNS int64 `json:"start_at_unix_ns,omitempty"`
	// StopAfterMS, when above 0, ends the process that long after it
	// started, as a user ends a load generator with Ctrl-C: SIGINT to its
	// process group, then SIGTERM and SIGKILL for whatever is left. Its
	// output is kept and the reply says Stopped; it is no failure.
	StopAfterMS int64 `json:"stop_after_ms,omitempty"`
	// Target is the id of the execution an OpCancel stops.
	Target uint64 `json:"target,omitempty"`
	// Arg is the argument of an operation the agent's Server.Ops adds.
	Arg string `json:"arg,omitempty"`
}

// MaxStartDelay bounds how far ahead a Request may schedule its start, so a
// mistaken clock cannot park an agent for hours.
const MaxStartDelay = time.Minute

// Rusage is the resource usage of the executed process and the children it
// waited for, as reported by wait4(2).
type Rusage struct {
	UserNS     int64 `json:"user_ns"`
	SysNS      int64 `json:"sys_ns"`
	MaxRSSKiB  int64 `json:"max_rss_kib"`
	VolCtxSw   int64 `json:"vol_ctx_switches"`
	InvolCtxSw int64 `json:"invol_ctx_switches"`
}

// Reply answers one Request.
type Reply struct {
	V        int    `json:"v"`
	ID       uint64 `json:"id"`
	Error    string `json:"error,omitempty"` // the request could not be carried out at all
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	TimedOut bool   `json:"timed_out,omitempty"`
	// Stopped says the process was ended at the request's StopAfterMS.
	Stopped bool   `json:"stopped,omitempty"`
	Stdout  []byte `json:"stdout,omitempty"`
	Stderr  []byte `json:"stderr,omitempty"`
	// Truncated is set when stdout or stderr exceeded the request's
	// MaxOutput; StdoutCut and StderrCut say what was dropped of each.
	Truncated bool   `json:"truncated,omitempty"`
	StdoutCut *Cut   `json:"stdout_cut,omitempty"`
	StderrCut *Cut   `json:"stderr_cut,omitempty"`
	WallNS    int64  `json:"wall_ns"`
	Rusage    Rusage `json:"rusage"`
	// StartedUnixNS and EndedUnixNS bracket the process on the agent's
	// clock, so runs in many guests can be placed on one time line.
	StartedUnixNS int64 `json:"started_unix_ns,omitempty"`
	EndedUnixNS   int64 `json:"ended_unix_ns,omitempty"`
	// Gated says the process was started ahead of StartAtUnixNS and held
	// by the start gate until then; StartedUnixNS is when the gate let it go.
	Gated bool `json:"gated,omitempty"`
	// StartWaitNS is how long the process, let go, waited for a CPU before
	// it first ran: a scheduler's turn where more tools than CPUs start
	// together, which is sharing, not a late start.
	StartWaitNS int64 `json:"start_wait_ns,omitempty"`
	// AgentUnixNS is the agent's clock when it answered a ping: with the
	// round trip around it, the offset of the guest's clock from the host's.
	AgentUnixNS int64 `json:"agent_unix_ns,omitempty"`
}

// Cut is what the agent dropped of an output longer than the request's
// MaxOutput: the reply keeps the output's first At bytes and its last
// Total-At-Dropped, each cut back to whole lines, so the Dropped bytes from
// offset At on are missing.
type Cut struct {
	At      int64 `json:"at"`
	Dropped int64 `json:"dropped"`
	Total   int64 `json:"total"`
}

// Cuts says, for a failure's message, what was cut of the reply's
// output, or "" when it is whole.
func (r Reply) Cuts() string {
	var parts []string
	for _, s := range []struct {
		name string
		cut  *Cut
	}{{"stdout", r.StdoutCut}, {"stderr", r.StderrCut}} {
		if c := s.cut; c != nil {
			parts = append(parts, fmt.Sprintf("%s's bytes %d to %d of %d dropped, its beginning and end kept", s.name, c.At, c.At+c.Dropped, c.Total))
		}
	}
	switch {
	case len(parts) > 0:
		return "output was cut: " + strings.Join(parts, "; ")
	case r.Truncated:
		return "output was cut" // by an agent that does not say where
	}
	return ""
}

// Wall is the execution's wall-clock time.
func (r Reply) Wall() time.Duration { return time.Duration(r.WallNS) }

// Succeeded reports whether the process ran and exited with status 0, or
// was stopped as the request asked, however it ended then.
func (r Reply) Succeeded() bool {
	return r.Error == "" && !r.TimedOut && (r.Stopped || r.Signal == "" && r.ExitCode == 0)
}

var (
	// ErrVersion is returned when the peer speaks another protocol version.
	ErrVersion = errors.New("agent protocol version mismatch")
	// ErrRemote wraps an error the agent reported in Reply.Error.
	ErrRemote = errors.New("agent error")
)
