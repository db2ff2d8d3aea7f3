// Package session prepares what every command that starts guests needs
// before the runner takes over: it checks that the host can run the
// scenarios' kinds, builds or reuses the images their guests boot, takes
// the host's fingerprint and, once given the results database, marks the
// runs whose vfleet died and returns the runner's options. `vfleet run`,
// `vfleet audit` and `vfleet fleet up` all start this way.
package session

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/image/native"
	"github.com/vfleet/vfleet/internal/runner"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/telemetry"
	"github.com/vfleet/vfleet/internal/tools"
	"github.com/vfleet/vfleet/internal/version"
	"github.com/vfleet/vfleet/internal/workload/programs"
)

// Config is where a session finds and keeps things.
type Config struct {
	// StateDir holds images, run state and ledgers.
	StateDir string
	// AgentPath is the host's static agent; empty: vfleet-agent beside
	// this executable.
	AgentPath string
	// Progress shows what building the images does.
	Progress *telemetry.Progress
	// Warnings gets what the session tells without failing (runs marked
	// aborted).
	Warnings io.Writer
}

// Session is a prepared start: the host can run the scenarios' guests and
// their images are ready.
type Session struct {
	cfg    Config
	img    *image.Image
	images guestImages
	host   hostinfo.Fingerprint
}

// Prepare checks, before anything is built or started, that a remote
// peer is reachable and ready and that the host can
// run every kind and runtime the scenarios ask for, then makes their
// images ready, checks what only they tell (whether KVM boots a kernel)
// and takes the host's fingerprint. The optional groups the host refuses
// are dropped from their spec (scenario.Spec.DropRefused) and named on
// cfg.Warnings.
func Prepare(ctx context.Context, cfg Config, specs ...*scenario.Spec) (*Session, error) {
	// A remote peer refused (its host key, a missing program, a NIC that
	// carries the session to it) is known before anything is built.
	for _, spec := range specs {
		if err := runner.CheckPeer(ctx, spec); err != nil {
			return nil, err
		}
	}
	ask := newProber()
	if err := dropRefused(specs, cfg.Warnings, func(g scenario.GuestGroup) error { return ask.kind(ctx, g) }); err != nil {
		return nil, err
	}
	img, err := EnsureImage(ctx, cfg, image.Variant{}, false)
	if err != nil {
		return nil, err
	}
	images, err := prepareGuestImages(ctx, cfg, specs)
	if err != nil {
		return nil, err
	}
	env := func(g scenario.GuestGroup) guest.Env {
		env := guest.Env{RootFS: img.RootFS, AgentPath: img.AgentPath, Progress: cfg.imageLog}
		if v, ok := images.variants[image.Variant{Arch: g.Arch, KernelFlavour: g.KernelFlavour}]; ok {
			env.RootFS, env.AgentPath = v.RootFS, v.AgentPath
		}
		return env
	}
	if err := dropRefused(specs, cfg.Warnings, func(g scenario.GuestGroup) error { return ask.spec(ctx, g, env(g)) }); err != nil {
		return nil, err
	}
	host, err := fingerprint(ctx, img, specs)
	if err != nil {
		return nil, err
	}
	return &Session{cfg: cfg, img: img, images: images, host: host}, nil
}

// Options marks aborted the runs of st whose vfleet died and returns the
// runner's options for runs stored in st.
func (s *Session) Options(ctx context.Context, st *store.Store) runner.Options {
	AbortOrphans(ctx, st, nil, s.cfg.Warnings)
	return runner.Options{
		Store:       st,
		StateRoot:   s.cfg.StateDir,
		RootFS:      s.img.RootFS,
		AgentPath:   s.img.AgentPath,
		Images:      s.images.users,
		AgentBinary: s.images.agentBinary,
		Variants:    s.images.variants,
		Host:        s.host,
		Progress:    s.cfg.Progress,
		PeerAgent:   func(arch string) (string, error) { return AgentBinary(s.cfg.AgentPath, arch) },
	}
}

// AbortOrphans marks the runs whose vfleet died as aborted, and says so on
// w. It is a courtesy to the store's readers: a failure is only reported.
// The runs of cleanedKeys had their ledgers cleaned just now.
func AbortOrphans(ctx context.Context, st *store.Store, cleanedKeys map[string]bool, w io.Writer) {
	aborted, err := runner.AbortOrphans(ctx, st, cleanedKeys)
	for _, r := range aborted {
		fmt.Fprintf(w, "vfleet: run %d (%s) was left running: marked aborted, %s; its samples are kept\n", r.ID, r.ScenarioName, r.StatusReason)
	}
	if err != nil {
		fmt.Fprintf(w, "vfleet: could not check for runs whose vfleet died: %v\n", err)
	}
}

// AgentBinary finds the static agent of an architecture: agentPath (or
// vfleet-agent next to vfleet) for the host's, and that path with -ARCH
// appended for another, as scripts/build.sh cross-builds it.
func AgentBinary(agentPath, arch string) (string, error) {
	p := agentPath
	if p == "" {
		self, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("find vfleet-agent: %w", err)
		}
		p = filepath.Join(filepath.Dir(self), "vfleet-agent")
	}
	if arch != image.HostArch {
		p += "-" + arch
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s not found (the %s agent); build it with scripts/build.sh, or pass --agent with the host's agent beside it", p, arch)
	}
	return p, nil
}

// EnsureImage builds (or reuses) one of vfleet's images, with its
// architecture's agent installed.
func EnsureImage(ctx context.Context, cfg Config, v image.Variant, rebuild bool) (*image.Image, error) {
	agentBin, err := AgentBinary(cfg.AgentPath, cmp.Or(v.Arch, image.HostArch))
	if err != nil {
		return nil, err
	}
	return image.Ensure(ctx, image.EnsureOptions{
		Root:        cfg.StateDir,
		Recipe:      image.RecipeOf(v),
		AgentBinary: agentBin,
		Rebuild:     rebuild,
		Progress:    cfg.imageLog,
	})
}

func (cfg Config) imageLog(line string) { cfg.Progress.Logf("image: %s", line) }

// guestImages are the images a run's guests need besides vfleet's own for
// this host: users' images, and vfleet's of the architectures its VMs
// emulate.
type guestImages struct {
	users map[string]runner.UserImage
	// agentBinary is the static agent users' images get brought in.
	agentBinary string
	variants    map[image.Variant]runner.VariantImage
}

// prepareGuestImages unpacks the users' images the scenarios name and
// builds vfleet's image of each emulated architecture, each once.
func prepareGuestImages(ctx context.Context, cfg Config, specs []*scenario.Spec) (guestImages, error) {
	out := guestImages{users: map[string]runner.UserImage{}, variants: map[image.Variant]runner.VariantImage{}}
	for _, grp := range guestGroups(specs) {
		v := image.Variant{Arch: grp.Arch, KernelFlavour: grp.KernelFlavour}
		if _, done := out.variants[v]; !v.Default() && !done {
			img, err := EnsureImage(ctx, cfg, v, false)
			if err != nil {
				return out, fmt.Errorf("guest group %q: vfleet's image (%s): %w", grp.Name, v, err)
			}
			agentBin, err := AgentBinary(cfg.AgentPath, cmp.Or(v.Arch, image.HostArch))
			if err != nil {
				return out, err
			}
			out.variants[v] = runner.VariantImage{RootFS: img.RootFS, AgentPath: img.AgentPath, AgentBinary: agentBin}
		}
		if _, done := out.users[grp.Image]; grp.Image == "" || done {
			continue
		}
		if guest.TraitsOf(grp.Spec).BootsDisk {
			// A VM boots the disk itself, with the agent brought in.
			out.users[grp.Image] = runner.UserImage{}
			continue
		}
		o, err := image.EnsureOCI(ctx, cfg.StateDir, grp.Image, cfg.imageLog)
		if err != nil {
			return out, fmt.Errorf("guest group %q: %w", grp.Name, err)
		}
		out.users[grp.Image] = runner.UserImage{RootFS: o.RootFS, Env: o.Env, Digest: o.Digest}
	}
	if len(out.users) == 0 {
		return out, nil
	}
	var err error
	out.agentBinary, err = AgentBinary(cfg.AgentPath, image.HostArch)
	return out, err
}

// fingerprint is the host's fingerprint with the versions of the image's
// measuring programs, vfleet's own and the runtimes the scenarios use.
func fingerprint(ctx context.Context, img *image.Image, specs []*scenario.Spec) (hostinfo.Fingerprint, error) {
	fp, err := hostinfo.Collect(hostinfo.Options{})
	if err != nil {
		return fp, fmt.Errorf("host fingerprint: %w", err)
	}
	fp.VfleetVer = version.String()
	fp.ToolVersions = map[string]string{}
	for _, p := range programs.Packages() {
		if v, ok := img.Manifest.Packages[p]; ok {
			fp.ToolVersions[p] = v
		}
	}
	fp.ToolVersions["image"] = img.Manifest.Hash
	if img.Manifest.Recipe.Programs != "" {
		for _, p := range native.Programs {
			fp.ToolVersions[filepath.Base(p.Name)] = "vfleet's own, source " + native.SourceHash(p)[:12]
		}
	}
	// A dedicated NIC's driver, firmware and offloads move results as a
	// kernel does; one run at a time has it (an A/B run is refused one).
	for _, s := range specs {
		if s.Network == nil || s.Network.Uplink == "" {
			continue
		}
		if fp.NIC, err = describeNIC(ctx, s.Network.Uplink); err != nil {
			return fp, fmt.Errorf("host fingerprint: %w", err)
		}
	}
	// The versions of what runs the guests (an OCI runtime, QEMU) matter
	// as much as the tools'.
	for _, g := range guestGroups(specs) {
		prog := guest.ProgramOf(g.Spec)
		if _, done := fp.ToolVersions[prog]; prog == "" || done {
			continue
		}
		if t, err := tools.Find(prog); err == nil {
			if v, err := tools.Version(ctx, t); err == nil {
				fp.ToolVersions[prog] = v
			}
		}
	}
	return fp, nil
}

// describeNIC describes a NIC of this host with its ethtool.
func describeNIC(ctx context.Context, name string) (*hostinfo.NIC, error) {
	t, err := tools.Find("ethtool")
	if err != nil {
		return nil, fmt.Errorf("describe NIC %s: %w", name, err)
	}
	return hostinfo.DescribeNIC(name, func(args ...string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, t.Path, args...).Output()
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", t.Path, strings.Join(args, " "), err)
		}
		return out, nil
	})
}

func guestGroups(specs []*scenario.Spec) []scenario.GuestGroup {
	var out []scenario.GuestGroup
	for _, s := range specs {
		out = append(out, s.Guests...)
	}
	return out
}
