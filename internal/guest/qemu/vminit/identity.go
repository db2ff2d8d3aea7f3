package vminit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/guest/identity"
)

// Identity is what makes a clone of a template its own guest. Every clone
// resumes as the template was when it was saved: its hostname, its clock,
// its random number generator's state and its NIC's address. The host
// sends the clone's own to the agent as an OpBecome, which the agent does
// in its own process: a new process would cost a clone most of its start,
// every instruction of it translated afresh under TCG.
type Identity struct {
	Hostname string `json:"hostname"`
	// Net is the clone's NIC configuration (NetConfig.String), empty
	// without a network.
	Net string `json:"net,omitempty"`
	// TemplateMAC is the MAC the NIC had in the template, which finds it.
	TemplateMAC string `json:"template_mac,omitempty"`
	// Seed is fresh randomness from the host, mixed into the kernel's
	// pool before its generator is reseeded, so clones draw different
	// numbers from the first read on.
	Seed []byte `json:"seed"`
	// UnixNano is the host's wall clock when it sent this; the saved
	// clock is as old as the template.
	UnixNano int64 `json:"unix_ns"`
}

// OpBecome is the agent operation that takes an Identity as JSON.
const OpBecome = "become"

// MinSeed is the least randomness a clone's generator is reseeded with.
const MinSeed = 32

// rndReseedCRNG is the ioctl that makes the kernel reseed its generator
// from its input pool at once (_IO('R', 0x07)); x/sys does not name it.
const rndReseedCRNG = 0x5207

// BecomeOp is OpBecome as an agent.Server operation.
func BecomeOp(_ context.Context, arg string) error {
	id, err := ParseIdentity(arg)
	if err != nil {
		return err
	}
	return Become(id)
}

// ParseIdentity reads OpBecome's argument.
func ParseIdentity(s string) (Identity, error) {
	var id Identity
	if err := json.Unmarshal([]byte(s), &id); err != nil {
		return id, fmt.Errorf("identity: %w", err)
	}
	if id.Hostname == "" || len(id.Hostname) > 64 {
		return id, fmt.Errorf("identity: hostname %q: want 1 to 64 characters", id.Hostname)
	}
	if len(id.Seed) < MinSeed {
		return id, fmt.Errorf("identity: a seed of %d bytes, want at least %d", len(id.Seed), MinSeed)
	}
	if id.UnixNano <= 0 {
		return id, errors.New("identity: no clock")
	}
	if id.Net != "" {
		if _, err := ParseNetConfig(id.Net); err != nil {
			return id, err
		}
		if _, err := net.ParseMAC(id.TemplateMAC); err != nil {
			return id, fmt.Errorf("identity: template MAC: %w", err)
		}
	}
	return id, nil
}

// Become gives this guest the identity: clock first, so that everything
// after it is stamped right, then randomness, hostname and network.
func Become(id Identity) error {
	ts := unix.NsecToTimespec(id.UnixNano)
	if err := unix.ClockSettime(unix.CLOCK_REALTIME, &ts); err != nil {
		return fmt.Errorf("set the clock: %w", err)
	}
	if err := reseed(id.Seed); err != nil {
		return err
	}
	if err := unix.Sethostname([]byte(id.Hostname)); err != nil {
		return fmt.Errorf("set the hostname: %w", err)
	}
	if err := identity.Write("/", id.Hostname); err != nil {
		return err
	}
	if id.Net == "" {
		return nil
	}
	c, err := ParseNetConfig(id.Net)
	if err != nil {
		return err
	}
	was, err := net.ParseMAC(id.TemplateMAC)
	if err != nil {
		return err
	}
	return configureNetFrom(was, c, nicWait)
}

// reseed mixes seed into the kernel's input pool and makes the generator
// reseed from it now, instead of at its next scheduled reseed, up to a
// minute later, during which clones would draw the same numbers.
func reseed(seed []byte) error {
	f, err := os.OpenFile("/dev/urandom", os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("reseed: %w", err)
	}
	defer f.Close()
	if _, err := f.Write(seed); err != nil {
		return fmt.Errorf("reseed: mix the seed in: %w", err)
	}
	if err := unix.IoctlSetInt(int(f.Fd()), rndReseedCRNG, 0); err != nil && !errors.Is(err, unix.ENODATA) {
		return fmt.Errorf("reseed: %w", err)
	}
	return nil
}
