package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/remoterun"
	"github.com/vfleet/vfleet/internal/session"
	"github.com/vfleet/vfleet/internal/store"
)

func newCleanCommand(g *globalOptions) *cobra.Command {
	var force, templates bool
	var on onFlags
	cmd := &cobra.Command{
		Use:   "clean",
		Short: "Remove whatever killed runs left behind (containers, processes, mounts, cgroups, state)",
		Long: `Remove whatever killed runs left behind. Every run records each resource it creates in
a ledger before creating it; clean undoes the ledgers of runs whose vfleet process is gone,
newest resource first, and says what it removed. Runs still in progress are left alone
unless --force is given.

Fleets ('vfleet fleet up') are removed too: the process that started one has exited once
it is up. To remove a single fleet, use 'vfleet fleet down NAME'.

Runs that the results database still lists as running although their vfleet is gone are
marked aborted; the samples they stored are kept.

With --templates, what guest kinds keep between runs is removed as well: the VM templates
that 'launch: clone' made; the next clone of each shape boots its template anew. Clones
running now are not disturbed.

With --on ssh://USER@HOST[,...], clean those machines instead: what runs of 'vfleet run
--on' (and searches of 'vfleet capacity --on') left there when the vfleet that started
them was killed. Their vfleet there is
stopped (and tears its guests down), the machine's own 'vfleet clean' runs, and the runs'
scratch is removed; the cached binaries and images stay. A run under way there is stopped
too: clean a machine nobody is running on.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(on.urls) > 0 {
				if force || templates {
					return usageError{errors.New("--force and --templates clean this machine: not with --on")}
				}
				return cleanOn(cmd.Context(), &on)
			}
			if err := requireRoot("vfleet clean"); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Minute)
			defer cancel()
			n, failed := 0, 0
			cleaned := map[string]bool{}
			_, err := ledger.Clean(ctx, filepath.Join(g.stateDir, "ledger"), ledger.CleanOptions{
				Force: force,
				Progress: func(r ledger.Removed) {
					cleaned[r.Run] = true
					if r.Err != nil {
						failed++
						fmt.Fprintf(os.Stdout, "run %s: could not remove %s: %v\n", r.Run, r.Entry.Describe(), r.Err)
						return
					}
					n++
					fmt.Fprintf(os.Stdout, "run %s: removed %s\n", r.Run, r.Entry.Describe())
				},
			})
			if _, serr := os.Stat(g.db()); serr == nil {
				st, serr := store.Open(g.db())
				if serr != nil {
					return errors.Join(err, serr)
				}
				defer st.Close()
				session.AbortOrphans(ctx, st, cleaned, os.Stderr)
			}
			if templates {
				// What the kinds keep between runs (the VM templates).
				removed, terr := guest.RemoveCaches(ctx, g.stateDir)
				for _, r := range removed {
					fmt.Fprintf(os.Stdout, "removed %s\n", r)
				}
				n += len(removed)
				err = errors.Join(err, terr)
			}
			switch {
			case n == 0 && failed == 0 && err == nil:
				fmt.Fprintln(os.Stdout, "nothing to clean")
			case failed == 0 && err == nil:
				fmt.Fprintf(os.Stdout, "removed %d resource(s)\n", n)
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "also clean runs whose vfleet process is still alive")
	cmd.Flags().BoolVar(&templates, "templates", false, "also remove what guest kinds keep between runs (the VM templates clones start from)")
	on.register(cmd.Flags(), "clean what killed runs of 'vfleet run --on' or 'vfleet capacity --on' left on these machines", false)
	return cmd
}

// cleanOn cleans each machine of --on; one that cannot be cleaned does not
// stop the others.
func cleanOn(ctx context.Context, on *onFlags) error {
	targets, err := on.targets()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	log := machineLog(os.Stdout)
	var failed []string
	for _, t := range targets {
		err := remoterun.Clean(ctx, t, on.config(), 0, func(line string) { log(t, line) })
		if err != nil {
			fmt.Fprintln(os.Stderr, "vfleet:", err)
			failed = append(failed, t.Name())
			continue
		}
		log(t, "clean")
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d machines not cleaned: %s", len(failed), len(targets), strings.Join(failed, ", "))
	}
	return nil
}
