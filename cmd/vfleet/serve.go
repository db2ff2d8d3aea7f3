package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/vfleet/vfleet/internal/metrics"
)

func newServeCommand(g *globalOptions) *cobra.Command {
	addr := metrics.DefaultAddr
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve Prometheus metrics of the results database until interrupted",
		Long: `Serve Prometheus metrics of the results database at http://ADDR/metrics until
Ctrl-C: the number of runs by status, each recent run's sample and failure counts,
and the latest value of every measured metric of the newest run. The database is
read at each scrape, so a run in progress in another process shows up as it goes.
See docs/observability.md for the metrics and a Grafana dashboard.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return serve(g, addr) },
	}
	cmd.Flags().Var(&checkedString{p: &addr, check: func(s string) error { _, err := metrics.ListenAddr(s); return err }}, "metrics-addr",
		"where to listen (HOST:PORT; :PORT or PORT bind 127.0.0.1)")
	return cmd
}

func serve(g *globalOptions, addr string) error {
	st, err := openExistingStore(g)
	if err != nil {
		return err
	}
	defer st.Close()
	reg, err := metrics.NewRegistry(metrics.NewStoreCollector(st, 0))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := metrics.Listen(addr, reg)
	if err != nil {
		return fmt.Errorf("--metrics-addr: %w", err)
	}
	if w := metricsExposure(srv.Addr()); w != "" {
		fmt.Fprintln(os.Stderr, "vfleet: warning:", w)
	}
	fmt.Fprintf(os.Stderr, "serving metrics of %s at http://%s/metrics (Ctrl-C to stop)\n", g.db(), srv.Addr())
	<-ctx.Done()
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Close(cctx)
}
