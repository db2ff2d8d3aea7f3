package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/vfleet/vfleet/internal/doctor"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/remote"
	"github.com/vfleet/vfleet/internal/session"
	"github.com/vfleet/vfleet/internal/workload"
	"github.com/vfleet/vfleet/internal/workload/programs"
)

func newDoctorCommand(g *globalOptions) *cobra.Command {
	var peer peerFlags
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Show what this host can do and what is missing",
		Long: `Probe the host: root, cgroups, overlayfs, namespaces, BPF, each OCI runtime (does it
really start a container?), QEMU and whether KVM really boots a guest kernel (with a
timeout: /dev/kvm can exist and still not work), and the measuring tools in the guest
image. Every missing piece says what to install.

With --peer ssh://USER@HOST[:PORT], check that remote machine instead, starting nothing
there: reachable, its host key known, a key accepted (from the SSH agent or --peer-identity,
never a password), its architecture, the network workloads' programs, ip and ethtool
(which a run needs there) with their versions, and a work directory it lets vfleet make.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if peer.url != "" {
				return doctorPeer(cmd.Context(), g, peer)
			}
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
	cmd.Flags().Var((*machineURL)(&peer.url), "peer", "check the remote peer ssh://USER@HOST[:PORT] instead of this host")
	cmd.Flags().StringVar(&peer.identity, "peer-identity", "", "private key file for the peer (default: the SSH agent's keys only)")
	cmd.Flags().StringVar(&peer.knownHosts, "peer-known-hosts", "", "known_hosts file the peer's host key is checked against (default ~/.ssh/known_hosts)")
	return cmd
}

type peerFlags struct{ url, identity, knownHosts string }

func doctorPeer(ctx context.Context, g *globalOptions, f peerFlags) error {
	target, err := remote.ParseURL(f.url)
	if err != nil {
		return usageError{err}
	}
	cfg := remote.Config{Identity: f.identity, KnownHosts: f.knownHosts}
	if err := cfg.Check(); err != nil {
		return usageError{fmt.Errorf("--peer-identity or --peer-known-hosts: %w", err)}
	}
	// The peer runs the servers of the network workloads, and a run puts
	// its side of the wire up with ip and describes its NIC with ethtool.
	progs := []programs.Program{remote.IP, remote.Ethtool}
	for _, name := range workload.Names() {
		w, _ := workload.Lookup(name)
		if _, ok := w.(workload.Networked); !ok {
			continue
		}
		for _, p := range w.Programs() {
			if p.Package != "" && !slices.Contains(progs, p) {
				progs = append(progs, p)
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	results := doctor.Peer(ctx, doctor.PeerOptions{
		Target: target, Config: cfg, Programs: progs,
		AgentFor: func(arch string) (string, error) { return session.AgentBinary(g.agentPath, arch) },
	})
	if err := doctor.Write(os.Stdout, results); err != nil {
		return err
	}
	for _, r := range results {
		if r.Status != doctor.OK {
			return fmt.Errorf("peer %s is not ready", target)
		}
	}
	return nil
}
