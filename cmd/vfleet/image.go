package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/session"
	"github.com/vfleet/vfleet/internal/workload"
)

func newImageCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "image", Short: "Manage the guest image"}
	var rebuild bool
	var arch, flavour string
	build := &cobra.Command{
		Use:   "build",
		Short: "Build the guest image (Debian with the measuring tools and the agent), or reuse the cached one",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !slices.Contains(guest.Arches, arch) {
				return usageError{fmt.Errorf("--arch %q: want one of %s", arch, strings.Join(guest.Arches, ", "))}
			}
			if !slices.Contains(guest.KernelFlavours, flavour) {
				return usageError{fmt.Errorf("--kernel-flavour %q: want one of %s", flavour, strings.Join(guest.KernelFlavours, ", "))}
			}
			if err := requireRoot("vfleet image build"); err != nil {
				return err
			}
			progress := newProgress()
			ctx, cancel := signalContext(progress)
			defer cancel()
			img, err := session.EnsureImage(ctx, g.session(progress), image.Variant{Arch: arch, KernelFlavour: flavour}, rebuild)
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
	build.Flags().StringVar(&arch, "arch", image.HostArch, "the image's architecture, for VM guests of it (another than the host's is built under qemu-user emulation)")
	build.Flags().StringVar(&flavour, "kernel-flavour", guest.KernelCloud, "the kernel VM guests of the image boot: "+strings.Join(guest.KernelFlavours, " or ")+" (PREEMPT_RT, with the timerlat and osnoise tracers)")
	inspect := &cobra.Command{
		Use:   "inspect [OCI-IMAGE]",
		Short: "Show vfleet's guest image, or a user's OCI image (layout or archive), and which workloads it can run",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				img, err := image.Open(g.stateDir, image.DefaultRecipe())
				if err != nil {
					return err
				}
				fmt.Fprintf(os.Stdout, "image %.12s: %s\n", img.Manifest.Hash, img.RootFS)
				printRunnable(os.Stdout, img.RootFS)
				return nil
			}
			if err := image.CheckOCI(g.stateDir, args[0]); err != nil {
				return usageError{err}
			}
			if err := requireRoot("vfleet image inspect OCI-IMAGE"); err != nil {
				return err
			}
			progress := newProgress()
			ctx, cancel := signalContext(progress)
			defer cancel()
			o, err := image.EnsureOCI(ctx, g.stateDir, args[0], func(line string) { progress.Logf("image: %s", line) })
			progress.Done()
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stdout, "image %s: %s (%d layers)\n", o.Digest, args[0], o.Layers)
			printRunnable(os.Stdout, o.RootFS)
			return nil
		},
	}
	var pushArch string
	push := &cobra.Command{
		Use:   "push REFERENCE",
		Short: "Put vfleet's guest image into a registry (REGISTRY/REPOSITORY:TAG), as the pod kind's pod_image, for a cluster to pull",
		Long: `Put vfleet's guest image, built first if it is not cached, into a registry as an OCI image of
one layer whose entrypoint is vfleet's agent: what a group of kind pod names as its pod_image.
Credentials are those docker login or podman login keep; a registry on loopback is spoken to
over plain HTTP. Prints the image's reference by digest.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(guest.Arches, pushArch) {
				return usageError{fmt.Errorf("--arch %q: want one of %s", pushArch, strings.Join(guest.Arches, ", "))}
			}
			if err := image.CheckPushReference(args[0]); err != nil {
				return usageError{err}
			}
			if err := requireRoot("vfleet image push"); err != nil {
				return err
			}
			progress := newProgress()
			ctx, cancel := signalContext(progress)
			defer cancel()
			img, err := session.EnsureImage(ctx, g.session(progress), image.Variant{Arch: pushArch}, false)
			if err != nil {
				progress.Done()
				return err
			}
			progress.Logf("image %.12s: pushing to %s", img.Manifest.Hash, args[0])
			ref, err := image.Push(ctx, img.RootFS, args[0], image.PushOptions{
				Arch: pushArch, Entrypoint: []string{img.AgentPath}, Labels: map[string]string{"dev.vfleet.image": img.Manifest.Hash}})
			progress.Done()
			if err != nil {
				return err
			}
			fmt.Fprintln(os.Stdout, ref)
			return nil
		},
	}
	push.Flags().StringVar(&pushArch, "arch", image.HostArch, "the image's architecture: that of the cluster's nodes")
	cmd.AddCommand(build, inspect, push)
	return cmd
}

// printRunnable lists, for each workload, whether a root file system has
// every program it runs (a network workload's servers included).
func printRunnable(w io.Writer, rootfs string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKLOAD\tPROGRAMS\tIN THE IMAGE")
	for _, name := range workload.Names() {
		wl, _ := workload.Lookup(name)
		progs := wl.Programs()
		if len(progs) == 0 {
			fmt.Fprintf(tw, "%s\t(yours)\tany program the image has\n", name)
			continue
		}
		var names, paths, missing []string
		for _, p := range progs {
			names = append(names, p.Name)
			if path, ok := image.LookPath(rootfs, p.Name); ok {
				paths = append(paths, path)
			} else {
				missing = append(missing, p.Name)
			}
		}
		where := strings.Join(paths, ", ")
		if len(missing) > 0 {
			where = "no " + strings.Join(missing, ", ") + ": steps of this workload fail"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", name, strings.Join(names, ", "), where)
	}
	tw.Flush()
}
