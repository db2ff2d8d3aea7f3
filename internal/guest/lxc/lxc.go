package lxc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	hostapparmor "github.com/containerd/containerd/v2/pkg/apparmor"
	promfs "github.com/prometheus/procfs"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/cgroup"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/guest/identity"
	"github.com/vfleet/vfleet/internal/guest/overlay"
	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/tools"
)

// KindName is the name scenarios use.
const KindName = "lxc"

func init() {
	guest.Register(kind{})
	ledger.RegisterUndo(kindContainer, undoContainer)
	// LXC's tools print their version alone on a line.
	tools.Register(tools.Spec{Name: "lxc-start", Package: "lxc", Banner: regexp.MustCompile(`\A(\d+\.\d+\.\d+\S*)\n?\z`)})
}

// kindContainer is the ledger entry of a started LXC container; ID is its
// name, Data its LXC path and the lxc-stop that stops it.
const kindContainer = "lxc-container"

// lxcSecurity are the profiles an LXC container takes, the default first:
// LXC's own defaults, as `lxc-start` deploys them.
var lxcSecurity = []string{guest.SecurityDefault, guest.SecurityUnconfined, guest.SecurityPrivileged, guest.SecurityUserNS}

// MinMemory is the least memory limit a container starts with: vfleet's
// agent, its init, is charged to it.
const MinMemory = 16 << 20

// installHint says where LXC's tools come from.
var installHint = tools.DebianInstall("lxc")

type kind struct{}

func (kind) Name() string { return KindName }

// Traits: an LXC container joins a namespace and is placed by cpusets,
// as the zero traits say; it takes the profiles of containers.
func (kind) Traits() guest.Traits { return guest.Traits{Security: lxcSecurity} }

// Program: LXC's own tools, whose releases change what a container is
// given (its defaults, its cgroup layout).
func (kind) Program(guest.Spec) string { return "lxc-start" }

// Leftovers are the lock directories LXC keeps under /run/lxc/lock for
// each LXC path it used, which it never removes itself: a guest's stop
// removes its own. The containers' processes are in the guests' cgroups,
// which the leak checks count.
func (kind) Leftovers() []string {
	var out []string
	_ = filepath.WalkDir(lockRoot, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, "lxc lock "+p)
		}
		return nil
	})
	return out
}

// ConformanceSpec: the suite's containers run within a CPU set and a
// memory limit, as a run's do.
func (kind) ConformanceSpec() guest.Spec {
	return guest.Spec{CPUs: "0", MemoryBytes: 512 << 20}
}

func (kind) Probe(_ context.Context, runtime string) error {
	if runtime != "" {
		return fmt.Errorf("%w: kind lxc takes no runtime (got %q)", guest.ErrNotSupported, runtime)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: LXC system containers need root", guest.ErrNotSupported)
	}
	if _, err := findTools(); err != nil {
		return err
	}
	for _, f := range []string{commonConf, usernsConf} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("%w: LXC's default configuration %s is missing: %s", guest.ErrNotSupported, f, installHint)
		}
	}
	if err := overlay.Supported("/proc"); err != nil {
		return fmt.Errorf("%w: %v", guest.ErrNotSupported, err)
	}
	return nil
}

// lxcTools are LXC's programs, which the Debian package lxc ships together.
type lxcTools struct{ start, stop, info string }

func findTools() (lxcTools, error) {
	var t lxcTools
	for name, dst := range map[string]*string{"lxc-start": &t.start, "lxc-stop": &t.stop, "lxc-info": &t.info} {
		p, err := exec.LookPath(name)
		if err != nil {
			return lxcTools{}, fmt.Errorf("%w: %s not found in PATH: %s", guest.ErrNotSupported, name, installHint)
		}
		*dst = p
	}
	return t, nil
}

func (kind) New(spec guest.Spec, env guest.Env) (guest.Guest, error) {
	if spec.Runtime != "" {
		return nil, fmt.Errorf("guest %s: kind lxc takes no runtime (got %q)", spec.Name, spec.Runtime)
	}
	if err := guest.CheckSpec(KindName, spec); err != nil {
		return nil, fmt.Errorf("guest %s: %v", spec.Name, err)
	}
	// Another kind's field, refused by CheckSpec where that kind is
	// compiled in; said plainly, as the scenario says it, everywhere.
	if spec.RTPriority != 0 {
		return nil, fmt.Errorf("guest %s: rt_priority is not supported by kind lxc: use kind container for real-time guests", spec.Name)
	}
	security, err := guest.SecurityOf(spec)
	if err != nil {
		return nil, fmt.Errorf("guest %s: %v", spec.Name, err)
	}
	if spec.MemoryBytes != 0 && spec.MemoryBytes < MinMemory {
		return nil, fmt.Errorf("guest %s: memory %d bytes is too little for an LXC container: give at least %dMiB (vfleet's agent runs inside the limit)",
			spec.Name, spec.MemoryBytes, MinMemory>>20)
	}
	dir := filepath.Join(env.StateDir, spec.Name)
	return &Guest{Base: guest.NewBase(spec), env: env, security: security, dir: dir, lxcPath: filepath.Join(dir, "lxc")}, nil
}

// Guest is one LXC container.
type Guest struct {
	*guest.Base
	env      guest.Env
	security string
	dir      string
	lxcPath  string // the container's own LXC path (lxc-start -P)
}

func (g *Guest) Start(ctx context.Context) error { return g.Launch(ctx, g.start) }

// startTimeout bounds lxc-start, which returns once the container runs.
// It is not the start's context: killed half-way, lxc-start could leave
// its monitor outside the cgroups that contain it.
const startTimeout = 30 * time.Second

func (g *Guest) start(ctx context.Context, undo *guest.Teardown) (*agent.Client, guest.Info, error) {
	fail := func(err error) (*agent.Client, guest.Info, error) { return nil, guest.Info{}, err }
	bin, err := findTools()
	if err != nil {
		return fail(err)
	}
	led, name := g.env.Ledger, g.Spec().Name

	sockDir := filepath.Join(g.dir, "sock")
	if err := undo.MakeDir(led, g.dir, "sock", filepath.Join("lxc", name)); err != nil {
		return fail(err)
	}
	layer, err := overlay.Mount(led, g.env.RootFS, g.dir)
	if err != nil {
		return fail(err)
	}
	undo.Push(layer.Unmount)
	if err := g.prepareRoot(layer.Merged, sockDir); err != nil {
		return fail(err)
	}

	v1, err := V1Controllers("/proc")
	if err != nil {
		return fail(err)
	}
	cgroupPath := cgroup.PathOf(g.env.RunID, name)
	monitorPath := cgroupPath + ".monitor"
	appArmor := hostapparmor.HostSupports()
	logPath := filepath.Join(g.dir, "lxc.log")
	config, err := Config(ConfigOptions{
		Name: name, RootFS: layer.Merged,
		Init:    []string{g.env.AgentPath, "--listen", guest.AgentSocket, "--workdir", guest.ScratchDir},
		Env:     g.env.ProcessEnv(),
		SockDir: sockDir, AgentBinary: g.env.AgentBinary, AgentPath: g.env.AgentPath,
		NetNS: g.Spec().NetNS, Cgroup: cgroupPath, Monitor: monitorPath, V1: v1,
		CPUs: g.Spec().CPUs, MemoryBytes: g.Spec().MemoryBytes, CPULimit: g.Spec().CPULimit,
		Security: g.security, AppArmor: appArmor, LogFile: logPath,
	})
	if err != nil {
		return fail(err)
	}
	if err := os.WriteFile(filepath.Join(g.lxcPath, name, "config"), []byte(config), 0o600); err != nil {
		return fail(err)
	}

	// Released newest first: the container is stopped, then what is left
	// of its monitor killed wherever LXC left it, then the container's
	// own cgroup emptied and removed.
	for _, p := range []string{cgroupPath, PivotOf(cgroupPath), monitorPath} {
		e, err := led.Record(cgroup.Kind, p, nil)
		if err != nil {
			return fail(err)
		}
		undo.PushRelease(led, e)
	}
	ctrEntry, err := led.Record(kindContainer, name, map[string]string{"lxcpath": g.lxcPath, "lxc-stop": bin.stop})
	if err != nil {
		return fail(err)
	}
	undo.PushRelease(led, ctrEntry)

	if v1["cpuset"] {
		if err := cgroup.FillCpusetParents(cgroup.CpusetV1Dir, cgroupPath); err != nil {
			return fail(err)
		}
	}
	pidPath := filepath.Join(g.dir, "monitor.pid")
	if err := g.lxcStart(bin.start, pidPath); err != nil {
		return fail(err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	monitor, err := readPid(pidPath)
	if err != nil {
		return fail(err)
	}
	initPid, err := g.initPid(ctx, bin.info)
	if err != nil {
		return fail(err)
	}

	readyCtx, cancel := context.WithTimeout(ctx, guest.ReadyTimeout)
	defer cancel()
	agentAddr := filepath.Join(sockDir, filepath.Base(guest.AgentSocket))
	client, err := agent.WaitReady(readyCtx, agentAddr)
	if err != nil {
		return fail(fmt.Errorf("%w; lxc log: %s", err, logErrors(logPath)))
	}
	return client, guest.Info{
		Kind: KindName,
		// The monitor is LXC's own cost beside every container: the
		// fleet's density counts it with the container's processes.
		PIDs:   []int{initPid, monitor},
		Cgroup: cgroupPath, ScratchDir: guest.ScratchDir, AgentAddr: agentAddr,
		Details: g.details(bin.start, appArmor),
	}, nil
}

// prepareRoot gives the container's root its identity, its scratch
// directory and the mount points of its binds, made beforehand: under
// security userns, the container's root may not create them in the
// image's directories, and must own the socket and scratch directories.
func (g *Guest) prepareRoot(merged, sockDir string) error {
	scratch := filepath.Join(merged, guest.ScratchDir)
	for _, d := range []string{scratch, filepath.Join(merged, guest.AgentSocketDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.Chmod(scratch, 0o1777); err != nil {
		return err
	}
	if err := identity.Write(merged, g.Spec().Name); err != nil {
		return err
	}
	if g.env.AgentBinary != "" {
		f, err := os.OpenFile(filepath.Join(merged, g.env.AgentPath), os.O_CREATE|os.O_RDONLY, 0o755)
		if err != nil {
			return fmt.Errorf("agent mount point: %w", err)
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	if g.security != guest.SecurityUserNS {
		return nil
	}
	// LXC checks that the container's root reaches its LXC path too.
	for _, d := range []string{merged, filepath.Join(g.lxcPath, g.Spec().Name)} {
		if err := guest.Searchable(d, []string{filepath.Dir(filepath.Dir(g.env.StateDir))}, guest.UserNSHostID); err != nil {
			return fmt.Errorf("security userns: %w", err)
		}
	}
	for _, d := range []string{scratch, sockDir} {
		if err := os.Chown(d, guest.UserNSHostID, guest.UserNSHostID); err != nil {
			return fmt.Errorf("give %s to the container's root: %w", d, err)
		}
	}
	return nil
}

// lxcStart starts the container daemonized: lxc-start returns once it
// runs, its monitor and the container left in their cgroups, with no
// tie to vfleet's life.
func (g *Guest) lxcStart(bin, pidPath string) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	err := exec.CommandContext(ctx, bin, "-P", g.lxcPath, "-n", g.Spec().Name, "-d", "-p", pidPath).Run()
	if err != nil {
		return fmt.Errorf("lxc-start: %w: %s", err, logErrors(filepath.Join(g.dir, "lxc.log")))
	}
	return nil
}

// initPid asks LXC for the container's init, vfleet's agent.
func (g *Guest) initPid(ctx context.Context, bin string) (int, error) {
	out, err := exec.CommandContext(ctx, bin, "-P", g.lxcPath, "-n", g.Spec().Name, "-p", "-H").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("lxc-info: %w: %s", err, guest.Tail(out, 300))
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("lxc-info gave %q, not the container's init pid", guest.Tail(out, 40))
	}
	return pid, nil
}

// logErrors is what LXC's log says went wrong: its lines at level ERROR,
// the last of them; LXC logs warnings for every start that are no
// failure, and tell nothing of one.
func logErrors(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("no lxc log: %v", err)
	}
	var errs []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, " ERROR ") {
			errs = append(errs, line)
		}
	}
	return guest.Tail([]byte(strings.Join(errs, "\n")), 1200)
}

func readPid(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read the lxc monitor's pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("lxc pid file %s holds %q, not a process id", path, guest.Tail(b, 40))
	}
	return pid, nil
}

// V1Controllers reads procRoot/cgroups (procRoot is /proc, or a fixture
// tree in tests): the controllers bound to a cgroup v1 hierarchy (a
// hierarchy id other than 0). On a hybrid host the others are the v2
// hierarchy's.
func V1Controllers(procRoot string) (map[string]bool, error) {
	fs, err := promfs.NewFS(procRoot)
	if err != nil {
		return nil, fmt.Errorf("cgroup controllers: %w", err)
	}
	all, err := fs.CgroupSummarys()
	if err != nil {
		return nil, fmt.Errorf("cgroup controllers: %w", err)
	}
	out := map[string]bool{}
	for _, c := range all {
		if c.Hierarchy != 0 && c.Enabled == 1 {
			out[c.SubsysName] = true
		}
	}
	return out, nil
}

// details record what the container runs under, for the run's record and
// the audit.
func (g *Guest) details(bin string, hostAppArmor bool) map[string]string {
	d := map[string]string{"lxc_path": g.lxcPath, "lxc_start": bin, "security": g.security,
		"seccomp": "none", "apparmor": "unconfined", "no_new_privileges": "false"}
	switch g.security {
	case guest.SecurityDefault, guest.SecurityUserNS:
		d["seccomp"] = "LXC default (" + commonConf + ": common.seccomp denylist)"
		d["capabilities"] = "LXC default (" + commonConf + " drops)"
		if hostAppArmor {
			d["apparmor"] = "generated by LXC"
		} else {
			d["apparmor"] = "not enabled on this host"
		}
	case guest.SecurityUnconfined:
		d["capabilities"] = "LXC default (" + commonConf + " drops)"
	case guest.SecurityPrivileged:
		d["capabilities"] = "all"
	}
	if g.security == guest.SecurityUserNS {
		d["idmap"] = fmt.Sprintf("0 %d %d", guest.UserNSHostID, guest.UserNSSize)
	}
	if ns := g.Spec().NetNS; ns != "" {
		d["netns"] = ns
	}
	return d
}

// notRunning is lxc-stop's exit status for a container that does not run
// (stopped, or never defined).
const notRunning = 2

// lockRoot is where LXC keeps the lock files of each LXC path (as the
// path below it), which it never removes.
const lockRoot = "/run/lxc/lock"

// undoContainer kills the container and its monitor's work; what is left
// in their cgroups is their own ledger entries' to kill.
func undoContainer(ctx context.Context, e ledger.Entry) error {
	stop, lxcPath := e.Data["lxc-stop"], e.Data["lxcpath"]
	if stop == "" || lxcPath == "" {
		return errors.New("ledger lxc container entry without lxc-stop or its path")
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, stop, "-P", lxcPath, "-n", e.ID, "-k").CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == notRunning) {
		return fmt.Errorf("stop lxc container %s: %w: %s", e.ID, err, guest.Tail(out, 300))
	}
	return removeLocks(lxcPath)
}

// removeLocks removes LXC's lock directory of an LXC path, then its
// parents that are left empty.
func removeLocks(lxcPath string) error {
	dir := filepath.Join(lockRoot, lxcPath)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove lxc locks: %w", err)
	}
	for d := filepath.Dir(dir); d != lockRoot && strings.HasPrefix(d, lockRoot+"/"); d = filepath.Dir(d) {
		if os.Remove(d) != nil {
			break // not empty: another LXC path's locks
		}
	}
	return nil
}
