package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/vfleet/vfleet/internal/doctor"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/image"
)

func newDoctorCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Show what this host can do and what is missing",
		Long: `Probe the host: root, cgroups, overlayfs, namespaces, BPF, each OCI runtime (does it
really start a container?), QEMU and whether KVM really boots a guest kernel (with a
timeout: /dev/kvm can exist and still not work), and the measuring tools in the guest
image. Every missing piece says what to install.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var opts doctor.Options
			var kinds []doctor.Contributor
			for _, name := range guest.KindNames() {
				if k, err := guest.Lookup(name); err == nil {
					if c, ok := k.(doctor.Contributor); ok {
						kinds = append(kinds, c)
					}
				}
			}
			// The image is only read: doctor never builds anything.
			if img, err := image.Open(g.stateDir, image.DefaultRecipe()); err == nil {
				opts.KernelPath, opts.ImagePackages = img.KernelPath, img.Manifest.Packages
			}
			checks := doctor.Checks(opts, kinds...)
			ctx, cancel := context.WithTimeout(cmd.Context(), 3*time.Minute)
			defer cancel()
			// The probes take seconds; a terminal gets a status line, a pipe
			// only the final list.
			var onDone func(doctor.Result)
			if isTerminal(os.Stderr) {
				progress := newProgress()
				progress.Phase("probing the host", len(checks))
				defer progress.Done()
				onDone = func(r doctor.Result) { progress.Item(r.Name, nil) }
			}
			results := doctor.Run(ctx, checks, onDone)
			if err := doctor.Write(os.Stdout, results); err != nil {
				return err
			}
			for _, r := range results {
				if r.Name == "root" && r.Status != doctor.OK {
					return fmt.Errorf("not root: most probes need root")
				}
			}
			return nil
		},
	}
}
