// Command vfleet-agent runs inside a guest and executes what vfleet on the
// host asks of it, over the protocol of package agent. It is built static
// (CGO_ENABLED=0) so the same binary runs in any guest image.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/audit/attack"
	"github.com/vfleet/vfleet/internal/audit/probe"
	"github.com/vfleet/vfleet/internal/guest/qemu/vminit"
	"github.com/vfleet/vfleet/internal/version"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "vfleet-agent:", err)
		os.Exit(1)
	}
}

// scratchDir is guest.ScratchDir, which the agent does not import.
const scratchDir = "/var/tmp/vfleet"

func run() error {
	// A user's VM image: first as the initramfs's first process, then as
	// the copy that serves beside the image's own init.
	if os.Getpid() == 1 && os.Args[0] == vminit.BesideInitPath {
		return vminit.Beside(os.Args[1:])
	}
	if len(os.Args) == 2 && os.Args[1] == vminit.BesideAgentArg {
		return serveBeside(func() (vminit.BesideConfig, error) { return vminit.EnterGuestRoot(os.NewFile(3, "proc"), scratchDir) })
	}
	// A user's firmware-booted VM image, started by cloud-init from the
	// seed that also holds its parameters.
	if len(os.Args) == 3 && os.Args[1] == vminit.SeedParamsArg {
		return serveBeside(func() (vminit.BesideConfig, error) {
			b, err := os.ReadFile(os.Args[2])
			if err != nil {
				return vminit.BesideConfig{}, err
			}
			return vminit.SetUpBeside(vminit.ParseCmdline(string(b)), scratchDir)
		})
	}
	// Read-only isolation probes, run by vfleet through the agent so that
	// they hold what its workloads hold.
	if len(os.Args) >= 2 && os.Args[1] == probe.ProbeArg {
		return probe.RunProbe(os.Args[2:], os.Stdout)
	}
	// The escape attempts' child in a user namespace of its own.
	if attack.IsChild(os.Args) {
		return attack.RunChild(os.Args[2:], os.Stdout)
	}
	listen := flag.String("listen", "", "serve on this unix socket path")
	stdio := flag.Bool("stdio", false, "serve one session on standard input and output")
	workdir := flag.String("workdir", "", "default working directory of executed commands")
	device := flag.String("device", "", "serve on this character device (a VM's virtio-serial port, /dev/virtio-ports/NAME)")
	pid1 := flag.Bool("pid1", false, "be a VM guest's init: mount, start the agent on the port named by the kernel command line, reap, power off on SIGTERM")
	showVersion := flag.Bool("version", false, "print the agent and protocol version and exit")
	if os.Getpid() == 1 {
		flag.CommandLine.Parse(vminit.InitArgs(os.Args[1:]))
	} else {
		flag.Parse()
	}

	if *showVersion {
		fmt.Printf("vfleet-agent %s (protocol %d)\n", version.String(), agent.Version)
		return nil
	}
	if *pid1 {
		return runInit(*workdir)
	}
	modes := 0
	for _, set := range []bool{*listen != "", *stdio, *device != ""} {
		if set {
			modes++
		}
	}
	if modes != 1 {
		return errors.New("give exactly one of --listen PATH, --stdio or --device PATH")
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	srv := agent.NewServer(version.String())
	srv.DefaultDir = *workdir

	if *stdio {
		return srv.ServeConn(ctx, stdioConn{})
	}
	if *device != "" {
		// The device is a VM's port: the VM may be a clone of a template.
		srv.Ops = map[string]func(context.Context, string) error{vminit.OpBecome: vminit.BecomeOp}
		return vminit.ServeDevice(ctx, srv, *device, vminit.PortWait)
	}
	// A stale socket from an earlier agent would make Listen fail.
	if err := os.Remove(*listen); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale socket: %w", err)
	}
	l, err := net.Listen("unix", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer os.Remove(*listen)
	return srv.Serve(ctx, l)
}

// runInit is the VM guest's init: first from the initramfs, where it
// mounts the root disk and runs itself again from there, then as the
// real root's PID 1.
func runInit(workdir string) error {
	if vminit.InInitramfs() {
		return vminit.Stage1(vminit.InitArgs(os.Args[1:]))
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if workdir == "" {
		workdir = scratchDir
	}
	return vminit.RunPID1(vminit.PID1Options{Agent: []string{self, "--workdir", workdir, "--device"}, Workdir: workdir})
}

// serveBeside is the agent in a user's VM image, beside the image's init,
// once setUp has made the guest ready for it.
func serveBeside(setUp func() (vminit.BesideConfig, error)) error {
	cfg, err := setUp()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	srv := agent.NewServer(version.String())
	srv.DefaultDir = scratchDir
	return vminit.ServeDevice(ctx, srv, cfg.Port, vminit.BesidePortWait)
}

type stdioConn struct{}

func (stdioConn) Read(p []byte) (int, error)  { return os.Stdin.Read(p) }
func (stdioConn) Write(p []byte) (int, error) { return os.Stdout.Write(p) }
