package agent

import (
	"context"
	"time"
)

// clockProbes is how many pings ClockOffset sends; the one with the
// shortest round trip wins, as in NTP, since a short round trip leaves the
// least room for the answer's moment to be off.
const clockProbes = 5

// ClockOffset estimates how far the agent's clock is ahead of this host's
// (negative when behind) and the round trip that bounds the error: the
// agent's answer is placed at the middle of the round trip. Guests sharing
// the host's kernel have an offset near zero; a VM's clock may be off by
// whatever its boot and emulation made of it.
// do sends one request: a Client's Do, or a guest's Exec.
func ClockOffset(ctx context.Context, do func(context.Context, Request) (Reply, error)) (offset, rtt time.Duration, err error) {
	best := time.Duration(-1)
	for i := 0; i < clockProbes; i++ {
		sent := time.Now()
		reply, err := do(ctx, Request{Op: OpPing})
		if err != nil {
			return 0, 0, err
		}
		received := time.Now()
		if d := received.Sub(sent); best < 0 || d < best {
			best = d
			mid := sent.Add(d / 2)
			offset = time.Unix(0, reply.AgentUnixNS).Sub(mid)
		}
	}
	return offset, best, nil
}
