package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/vfleet/vfleet/internal/archive"
	"github.com/vfleet/vfleet/internal/regfile"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/termtext"
)

func newExportCommand(g *globalOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "export RUN... -o FILE",
		Short: "Write stored runs, with everything measured and recorded, into one file for another store",
		Long: `Write the runs (ids from 'vfleet runs', latest, or all: every run stored) with their samples, histograms, failures,
audit and provenance into FILE (gzip'd JSON Lines, checked by a sha256), which 'vfleet import'
reads into another results database. -o - writes to standard output. A run still running is
refused: export it once it has ended.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output == "" {
				return usageError{errors.New("-o FILE is required (- for standard output)")}
			}
			st, err := openExistingStore(g)
			if err != nil {
				return err
			}
			defer st.Close()
			ids, err := exportedRuns(cmd.Context(), st, args)
			if err != nil {
				return err
			}
			return g.writeOutput(output, func(w io.Writer) error { return archive.Export(cmd.Context(), st, ids, w) })
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "the file to write (- for standard output)")
	return cmd
}

// exportedRuns resolves export's arguments: run ids, latest, or all, every
// run of the store in id order (how a machine's scratch database comes
// back whole to 'run --on' and 'capacity --on').
func exportedRuns(ctx context.Context, st *store.Store, refs []string) ([]int64, error) {
	var ids []int64
	for _, ref := range refs {
		if ref != "all" {
			id, err := st.ResolveRun(ctx, ref)
			if err != nil {
				return nil, err
			}
			ids = append(ids, id)
			continue
		}
		runs, err := st.ListRuns(ctx)
		if err != nil {
			return nil, err
		}
		if len(runs) == 0 {
			return nil, fmt.Errorf("all runs: %w: none stored yet", store.ErrNotFound)
		}
		for _, r := range runs {
			ids = append(ids, r.ID)
		}
	}
	return ids, nil
}

func newImportCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "import FILE...",
		Short: "Read runs written by 'vfleet export' into the results database",
		Long: `Read each FILE written by 'vfleet export' (- for standard input) into the results database,
one file at a time, each whole or not at all. A run is known by its key: one already in the
database is left as it is. A damaged, truncated or newer file is refused without changing the
database, and the files after it are not read.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := store.Open(g.db())
			if err != nil {
				return err
			}
			defer st.Close()
			for _, path := range args {
				if err := importFile(cmd, st, path); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

func importFile(cmd *cobra.Command, st *store.Store, path string) error {
	r := io.Reader(os.Stdin)
	if path != "-" {
		f, _, err := regfile.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	imported, err := archive.Import(cmd.Context(), st, r, archive.ImportOptions{})
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, im := range imported {
		switch {
		case im.Differs:
			fmt.Fprintf(cmd.OutOrStdout(), "run %s: already present as #%d, and the file's differs from it: kept the stored one\n", termtext.Safe(im.Key), im.ID)
		case im.Existed:
			fmt.Fprintf(cmd.OutOrStdout(), "run %s: already present as #%d\n", termtext.Safe(im.Key), im.ID)
		default:
			fmt.Fprintf(cmd.OutOrStdout(), "run %s: imported as #%d\n", termtext.Safe(im.Key), im.ID)
		}
	}
	return nil
}
