// Package remoterun runs a scenario on other machines (`vfleet run --on`,
// and its capacity search, `vfleet capacity --on`): over an SSH connection
// (internal/remote) it installs vfleet's static binaries for the machine's
// architecture, gives it the guest image (pushed from this machine's
// cache, or built there), runs vfleet there with a state directory of its
// own, streams its progress back line by line, brings the runs (and a file
// the command wrote) back into the local store marked with the machine's
// name, and removes the run's scratch there.
//
// On each machine everything lives under one directory: the
// binaries (kept, and replaced only when their hash changes), the state
// directory (images cached between runs, the remote vfleet's ledger) and
// one scratch directory per run (its results database, its scenario file,
// the remote vfleet's pid), removed once the run is back. What a run
// leaves when this vfleet is killed, Clean removes.
package remoterun

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/remote"
)

// Image modes: how a machine gets its guest image.
const (
	// ImageAuto pushes this machine's cached image for the machine's
	// architecture when there is one, else lets the machine build it.
	ImageAuto = ""
	ImagePush = "push"
	// ImageBuild lets the remote vfleet build the image (mmdebstrap there).
	ImageBuild = "build"
)

// ErrNoBinary says this machine has no vfleet for the machine's
// architecture to copy there.
var ErrNoBinary = errors.New("no vfleet binary for the machine's architecture")

// ErrNoImage says --image push was asked and this machine's cache has no
// image for the machine's architecture.
var ErrNoImage = errors.New("no cached image to push")

// Options say what to run and how.
type Options struct {
	// Config reaches every machine.
	Config remote.Config
	// Scenario is a local scenario file or a built-in scenario's name.
	Scenario string
	// StateDir is this machine's: its image cache is what is pushed.
	StateDir string
	// Image is ImageAuto, ImagePush or ImageBuild.
	Image string
	// Binaries finds this machine's static vfleet and vfleet-agent for a
	// Debian architecture.
	Binaries func(arch string) (vfleet, agent string, err error)
	// Import brings a run back: the stream is what `vfleet export` wrote
	// on the machine; it returns the IDs the runs have in the local store.
	Import func(ctx context.Context, machine remote.Target, export io.Reader) ([]int64, error)
	// Log takes each line about a machine: the remote vfleet's progress
	// and what is done to bring it up.
	Log func(machine remote.Target, line string)
	// Grace is how long the remote vfleet gets, once stopped, to undo its
	// work; 0 is DefaultGrace.
	Grace time.Duration
	// Command is the remote vfleet's command and its flags, the scenario
	// given after them; nil runs it (RunCommand). It runs in the run's
	// scratch directory, so a relative path names a file there.
	Command []string
	// Output names a file the command writes in the scratch directory,
	// brought back as Result.Output.
	Output string
	// Runs says, from Output, which runs of the remote database come back
	// and in what order, as arguments of ` + "`vfleet export`" + `; nil, or nil
	// returned, brings back all of them.
	Runs func(output []byte) []string
}

// RunCommand is the remote vfleet's command unless Options say another:
// the scenario's run, its report left to this machine.
var RunCommand = []string{"run", "--html", "-"}

// StopOnEOFFlag is the flag of `vfleet run` and `vfleet capacity` (hidden: for vfleet's own
// use) that makes the end of its standard input a Ctrl-C.
const StopOnEOFFlag = "stop-on-eof"

// DefaultGrace bounds a remote run's teardown after Ctrl-C: a run of many
// VMs under TCG takes a while to stop.
const DefaultGrace = 2 * time.Minute

// Result is how the run on one machine went.
type Result struct {
	Target remote.Target
	// Runs are the local IDs of the runs brought back, in the order
	// Options.Runs gave them.
	Runs []int64
	// Output is the content of Options.Output, nil when the remote vfleet
	// wrote none.
	Output []byte
	// Exit is the remote vfleet's exit status, -1 when it did not run to
	// an end.
	Exit int
	// Err says why the machine failed; nil when its run came back.
	Err error
	// Took is the machine's time, connection to clean up.
	Took time.Duration
}

// dirs is where vfleet keeps its work on a machine: $TMPDIR/vfleet-remote,
// or /var/tmp/vfleet-remote (kept across reboots) when TMPDIR is unset.
type dirs struct{ Dir string }

// dirsScript makes the directories, only root's to read (the
// state directory holds images and results), and prints where.
const dirsScript = `d="${TMPDIR:-/var/tmp}/vfleet-remote" && mkdir -p "$d/bin" "$d/state" "$d/runs" && chmod 700 "$d" && echo "$d"`

func (l dirs) bin(name string) string { return path.Join(l.Dir, "bin", name) }
func (l dirs) state() string          { return path.Join(l.Dir, "state") }
func (l dirs) runs() string           { return path.Join(l.Dir, "runs") }

// Names in a run's scratch directory.
const (
	dbName  = "results.db"
	pidName = "vfleet.pid"
)

func openDirs(ctx context.Context, m *remote.Machine) (dirs, error) {
	out, err := m.Run(ctx, nil, "sh", "-c", dirsScript)
	if err != nil {
		return dirs{}, fmt.Errorf("make vfleet's directory: %w", err)
	}
	dir := strings.TrimSpace(string(out))
	if !path.IsAbs(dir) {
		return dirs{}, fmt.Errorf("make vfleet's directory: the shell said %q", dir)
	}
	return dirs{Dir: dir}, nil
}

// Run runs the scenario on the machine and brings its run back. It never
// panics on a machine's failure: the result says it.
func Run(ctx context.Context, t remote.Target, o Options) (res Result) {
	began := time.Now()
	res = Result{Target: t, Exit: -1}
	defer func() { res.Took = time.Since(began) }()
	logf := func(format string, args ...any) { o.Log(t, "vfleet --on: "+fmt.Sprintf(format, args...)) }

	m, err := remote.Dial(ctx, t, o.Config)
	if err != nil {
		// Dial's error names the machine.
		res.Err = err
		return res
	}
	defer m.Close(context.WithoutCancel(ctx))
	res.Err = run(ctx, m, o, logf, &res)
	return res
}

func run(ctx context.Context, m *remote.Machine, o Options, logf func(string, ...any), res *Result) error {
	arch, err := m.Arch(ctx)
	if err != nil {
		return err
	}
	vfleetBin, agentBin, err := o.Binaries(arch)
	if err != nil {
		return err
	}
	l, err := openDirs(ctx, m)
	if err != nil {
		return err
	}
	logf("%s machine, vfleet's directory %s", arch, l.Dir)
	for _, b := range []struct{ local, name string }{{vfleetBin, "vfleet"}, {agentBin, "vfleet-agent"}} {
		if err := install(ctx, m, b.local, l.bin(b.name), logf); err != nil {
			return err
		}
	}
	if err := ensureImage(ctx, m, l, arch, o, logf); err != nil {
		return err
	}

	// The run's scratch goes before anything of the run starts, so that
	// Clean finds whatever follows.
	out, err := m.Run(ctx, nil, "mktemp", "-d", path.Join(l.runs(), "run.XXXXXX"))
	if err != nil {
		return fmt.Errorf("scratch directory: %w", err)
	}
	scratch := strings.TrimSpace(string(out))
	if !path.IsAbs(scratch) || path.Dir(scratch) != l.runs() {
		return fmt.Errorf("scratch directory: mktemp said %q", scratch)
	}
	defer func() {
		// Even after Ctrl-C: the scratch is this run's alone.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, err := m.Run(cctx, nil, "rm", "-rf", "--", scratch); err != nil {
			logf("could not remove %s: %v (vfleet clean --on removes it)", scratch, err)
		}
	}()
	ref := o.Scenario
	if fi, err := os.Stat(o.Scenario); err == nil && fi.Mode().IsRegular() {
		ref = path.Join(scratch, "scenario-"+filepath.Base(o.Scenario))
		if err := m.Upload(ctx, o.Scenario, ref, 0o600); err != nil {
			return err
		}
	}

	// The remote vfleet's last line is its error, when it fails.
	var last string
	lines := &lineWriter{emit: func(s string) {
		if strings.TrimSpace(s) != "" {
			last = s
		}
		o.Log(m.Target, s)
	}}
	// The shell writes its pid and becomes vfleet, so that Clean can stop
	// it by its pid; the session's input ending (Ctrl-C here, or this
	// vfleet gone) is its Ctrl-C.
	script := `cd "$1" && echo $$ > ` + pidName + ` && d=$1 v=$2 s=$3 && shift 3 && exec "$v" --state-dir "$s" --db "$d/` + dbName + `" "$@"`
	args := append([]string{"sh", "-c", script, "sh", scratch, l.bin("vfleet"), l.state()}, o.Command...)
	if o.Command == nil {
		args = append(args, RunCommand...)
	}
	args = append(args, "--"+StopOnEOFFlag, ref)
	runErr := m.Stream(ctx, io.Discard, lines, cmpDuration(o.Grace, DefaultGrace), args...)
	lines.Flush()
	if status, ok := remote.ExitStatus(runErr); ok {
		res.Exit = status
	} else if runErr == nil {
		res.Exit = 0
	}

	// What was measured comes back however the run ended, interrupted
	// included: a fresh context, bounded.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
	defer cancel()
	output, ids, backErr := bringBack(bctx, m, l, scratch, o)
	res.Runs, res.Output = ids, output
	switch {
	case runErr != nil && res.Exit < 0:
		return errors.Join(fmt.Errorf("vfleet on %s: %w", m.Target.Name(), runErr), backErr)
	case res.Exit != 0 && len(ids) == 0:
		return errors.Join(fmt.Errorf("vfleet on %s exited %d: %s", m.Target.Name(), res.Exit, last), backErr)
	case backErr != nil:
		return backErr
	}
	return nil
}

// bringBack reads the command's output file, exports the runs from the
// scratch's database, if the remote vfleet got as far as storing one, and
// imports them here.
func bringBack(ctx context.Context, m *remote.Machine, l dirs, scratch string, o Options) ([]byte, []int64, error) {
	var output []byte
	if o.Output != "" {
		out, err := m.Run(ctx, nil, "sh", "-c", `if [ -f "$1" ]; then cat "$1"; fi`, "sh", path.Join(scratch, o.Output))
		if err != nil {
			return nil, nil, fmt.Errorf("read %s on %s: %w", o.Output, m.Target.Name(), err)
		}
		if len(out) > 0 {
			output = out
		}
	}
	db := path.Join(scratch, dbName)
	if _, err := m.Run(ctx, nil, "test", "-s", db); err != nil {
		return output, nil, nil
	}
	refs := []string{"all"}
	if o.Runs != nil {
		if r := o.Runs(output); r != nil {
			refs = r
		}
	}
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	exported := make(chan error, 1)
	go func() {
		argv := append([]string{l.bin("vfleet"), "--state-dir", l.state(), "--db", db, "export", "-o", "-", "--"}, refs...)
		err := m.Stream(ctx, pw, &stderr, time.Minute, argv...)
		if err != nil {
			err = fmt.Errorf("export the runs on %s: %w: %s", m.Target.Name(), err, strings.TrimSpace(stderr.String()))
		}
		pw.CloseWithError(err)
		exported <- err
	}()
	ids, err := o.Import(ctx, m.Target, pr)
	pr.CloseWithError(io.ErrClosedPipe)
	if err != nil {
		err = fmt.Errorf("import the runs of %s: %w", m.Target.Name(), err)
	}
	// Either may be the cause of the other's failure (an export that wrote
	// nothing, an import that stopped reading): both are said.
	return output, ids, errors.Join(<-exported, err)
}

// install puts the local file at dst on the machine, unless the file there
// has its hash already; a new copy replaces the old in one rename.
func install(ctx context.Context, m *remote.Machine, local, dst string, logf func(string, ...any)) error {
	sum, err := fileSHA256(local)
	if err != nil {
		return err
	}
	out, err := m.Run(ctx, nil, "sh", "-c", `if [ -f "$1" ]; then sha256sum "$1"; fi`, "sh", dst)
	if err != nil {
		return fmt.Errorf("hash of %s: %w", dst, err)
	}
	if there, _, _ := strings.Cut(string(out), " "); there == sum {
		return nil
	}
	logf("copying %s (%s)", path.Base(dst), local)
	if err := m.Upload(ctx, local, dst+".new", 0o755); err != nil {
		return err
	}
	if _, err := m.Run(ctx, nil, "mv", "-f", dst+".new", dst); err != nil {
		return fmt.Errorf("install %s: %w", dst, err)
	}
	return nil
}

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// imageEntries are what a pushed image is: the manifest (whose presence
// marks an image complete) and the root file system. What the machine
// makes from them (VM boot files, templates) it makes itself.
var imageEntries = []string{"manifest.json", "rootfs"}

// ensureImage gives the machine vfleet's image for its architecture, by
// o.Image: pushed from the local cache unless it has it already, or left
// for the remote vfleet to build.
func ensureImage(ctx context.Context, m *remote.Machine, l dirs, arch string, o Options, logf func(string, ...any)) error {
	if o.Image == ImageBuild {
		logf("the machine builds its image if it has none (--image build)")
		return nil
	}
	recipe := image.RecipeFor(arch)
	hash := recipe.Hash()
	dst := path.Join(l.state(), "images", hash)
	if _, err := m.Run(ctx, nil, "test", "-f", path.Join(dst, "manifest.json")); err == nil {
		logf("image %.12s cached there", hash)
		return nil
	}
	img, err := image.Open(o.StateDir, recipe)
	if err != nil {
		if o.Image == ImagePush {
			return fmt.Errorf("%w: %s has no %s image (%v): build it with 'vfleet image build', or give --image build", ErrNoImage, o.StateDir, arch, err)
		}
		logf("no %s image cached here: the machine builds it (minutes)", arch)
		return nil
	}
	logf("pushing image %.12s", hash)
	began := time.Now()
	// Into a directory of its own, renamed into place once complete, so
	// that an interrupted push is never taken for an image, and two
	// vfleets pushing at once do not mix.
	out, err := m.Run(ctx, nil, "sh", "-c", `mkdir -p "$1" && mktemp -d "$1/.push-$2.XXXXXX"`, "sh", path.Join(l.state(), "images"), hash)
	if err != nil {
		return fmt.Errorf("push image: %w", err)
	}
	tmp := strings.TrimSpace(string(out))
	if !path.IsAbs(tmp) {
		return fmt.Errorf("push image: mktemp said %q", tmp)
	}
	if err := m.Push(ctx, img.Dir, imageEntries, tmp); err != nil {
		m.Run(context.WithoutCancel(ctx), nil, "rm", "-rf", "--", tmp)
		return err
	}
	if _, err := m.Run(ctx, nil, "sh", "-c", `if [ -e "$2" ]; then rm -rf -- "$1"; else mv "$1" "$2"; fi`, "sh", tmp, dst); err != nil {
		return fmt.Errorf("push image: %w", err)
	}
	logf("image pushed in %s", time.Since(began).Round(100*time.Millisecond))
	return nil
}

func cmpDuration(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// lineWriter cuts what is written into lines and gives each to emit.
type lineWriter struct {
	emit func(string)
	buf  []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.emit(strings.TrimRight(string(w.buf[:i]), "\r"))
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

// Flush gives emit what is left after the last newline.
func (w *lineWriter) Flush() {
	if len(w.buf) > 0 {
		w.emit(string(w.buf))
		w.buf = nil
	}
}
