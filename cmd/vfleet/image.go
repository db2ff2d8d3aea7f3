package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func newImageCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "image", Short: "Manage the guest image"}
	var rebuild bool
	build := &cobra.Command{
		Use:   "build",
		Short: "Build the guest image (Debian with the measuring tools and the agent), or reuse the cached one",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireRoot("vfleet image build"); err != nil {
				return err
			}
			progress := newProgress()
			ctx, cancel := signalContext(progress)
			defer cancel()
			img, err := ensureImage(ctx, g, progress, rebuild)
			progress.Done()
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stdout, "image %.12s: %s (built %s in %s; %d packages)\n", img.Manifest.Hash, img.RootFS,
				img.Manifest.Built.Local().Format("2006-01-02 15:04"), img.Manifest.BuildDuration.Round(1e9), len(img.Manifest.Packages))
			return nil
		},
	}
	build.Flags().BoolVar(&rebuild, "rebuild", false, "build anew even when a cached image matches the recipe")
	cmd.AddCommand(build)
	return cmd
}
