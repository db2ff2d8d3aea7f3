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
	"github.com/vfleet/vfleet/internal/version"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "vfleet-agent:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", "", "serve on this unix socket path")
	stdio := flag.Bool("stdio", false, "serve one session on standard input and output")
	workdir := flag.String("workdir", "", "default working directory of executed commands")
	showVersion := flag.Bool("version", false, "print the agent and protocol version and exit")
	flag.Parse()

	if *showVersion {
		fmt.Printf("vfleet-agent %s (protocol %d)\n", version.String(), agent.Version)
		return nil
	}
	if (*listen == "") == !*stdio {
		return errors.New("give exactly one of --listen PATH or --stdio")
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	srv := agent.NewServer(version.String())
	srv.DefaultDir = *workdir

	if *stdio {
		return srv.ServeConn(ctx, stdioConn{})
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

type stdioConn struct{}

func (stdioConn) Read(p []byte) (int, error)  { return os.Stdin.Read(p) }
func (stdioConn) Write(p []byte) (int, error) { return os.Stdout.Write(p) }
