package container

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vfleet/vfleet/internal/cgroup"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/tools"
)

// DefaultRuntime is used when a scenario names none.
const DefaultRuntime = "runc"

// runtimeTools are the runtimes the kind knows, in a stable order, as
// internal/tools knows them: where each comes from, for errors that tell
// the user what to install, and the version each prints.
var runtimeTools = []tools.Spec{
	{Name: "runc", Package: "runc", Banner: regexp.MustCompile(`(?m)^runc version (\S+)`)},
	{Name: "crun", Package: "crun", Banner: regexp.MustCompile(`(?m)^crun version (\S+)`)},
	{Name: "runsc", Package: "runsc", Banner: regexp.MustCompile(`(?m)^runsc version (\S+)`)},
	{Name: "kata-runtime", Install: tools.Upstream("Kata Containers", "the Kata Containers releases"), Banner: regexp.MustCompile(`(?m)^kata-runtime\s*:\s*(\S+)`)},
}

func init() {
	for _, s := range runtimeTools {
		tools.Register(s)
	}
}

// Runtimes lists the runtimes the kind knows, in a stable order.
func Runtimes() []string {
	names := make([]string, len(runtimeTools))
	for i, s := range runtimeTools {
		names[i] = s.Name
	}
	return names
}

// kindContainer is the ledger entry of a created container; ID is the
// container id, Data["runtime"] the runtime binary, Data["root"] the
// runtime's state directory when it is not the runtime's default (runsc's,
// under the guest's own state directory).
const kindContainer = "container"

func init() { ledger.RegisterUndo(kindContainer, undoContainer) }

// runtimeBinary finds the runtime's executable, or says how to get it.
func runtimeBinary(name string) (string, error) {
	if !slices.Contains(Runtimes(), name) {
		return "", fmt.Errorf("%w: unknown container runtime %q (known: %s)", guest.ErrNotSupported, name, strings.Join(Runtimes(), ", "))
	}
	t, err := tools.Find(name)
	if err != nil {
		return "", fmt.Errorf("%w: container runtime %w", guest.ErrNotSupported, err)
	}
	return t.Path, nil
}

// Leftovers lists the containers each installed runtime knows of in its
// host-wide state directory: a container a teardown missed stays there.
// runsc keeps its records in the guest's own state directory instead
// (--root), which goes with the run's; its processes are in the guest's
// cgroups, which the leak checks count.
func (kind) Leftovers() []string {
	var out []string
	for _, rt := range Runtimes() {
		bin, err := exec.LookPath(rt)
		if err != nil || rt == runscRuntime {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		b, err := exec.CommandContext(ctx, bin, "list", "-q").Output()
		cancel()
		if err != nil {
			continue
		}
		for _, id := range strings.Fields(string(b)) {
			out = append(out, rt+" container "+id)
		}
	}
	return out
}

// runtimeCmd runs one runtime subcommand after the runtime's global flags
// and returns its combined output.
func runtimeCmd(ctx context.Context, bin string, global []string, sub string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, append(append(append([]string(nil), global...), sub), args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.Bytes(), fmt.Errorf("%s %s: %w: %s", bin, sub, err, strings.TrimSpace(out.String()))
	}
	return out.Bytes(), nil
}

// readPidFile reads the pid a runtime's `run --pid-file` wrote.
func readPidFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read container pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("container pid file %s holds %q, not a process id", path, guest.Tail(b, 40))
	}
	return pid, nil
}

// deleteContainer kills and deletes a container; a container that does not
// exist is already deleted.
func deleteContainer(ctx context.Context, bin string, global []string, id string) error {
	_, _ = runtimeCmd(ctx, bin, global, "kill", id, "KILL")
	return deleteStopped(ctx, bin, global, id)
}

// deleteStopped deletes a container whose processes are gone (or that
// does not exist).
func deleteStopped(ctx context.Context, bin string, global []string, id string) error {
	if _, err := runtimeCmd(ctx, bin, global, "delete", "--force", id); err != nil && exists(ctx, bin, global, id) {
		return err
	}
	return nil
}

func exists(ctx context.Context, bin string, global []string, id string) bool {
	_, err := runtimeCmd(ctx, bin, global, "state", id)
	return err == nil
}

func undoContainer(ctx context.Context, e ledger.Entry) error {
	bin := e.Data["runtime"]
	if bin == "" {
		return errors.New("ledger container entry without runtime")
	}
	if _, err := exec.LookPath(bin); err != nil {
		return fmt.Errorf("remove container %s: %w", e.ID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	global := rootFlags(e.Data["root"])
	// Killed through its cgroup, a container is stopped when its runtime
	// is asked to delete it: one run of the runtime's binary instead of a
	// kill and a delete (a delete --force of a running container sleeps
	// 100 ms before it looks whether the kill took).
	if cg := e.Data["cgroup"]; cg != "" {
		if err := cgroup.Kill(ctx, cg); err != nil {
			return fmt.Errorf("remove container %s: %w", e.ID, err)
		}
		return deleteStopped(ctx, bin, global, e.ID)
	}
	return deleteContainer(ctx, bin, global, e.ID)
}

// rootFlags are the global flags that point a runtime at its state
// directory, root; none for the runtime's default.
func rootFlags(root string) []string {
	if root == "" {
		return nil
	}
	return []string{"--root", root}
}
