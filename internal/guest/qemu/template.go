package qemu

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/flock"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/guest/qemu/vminit"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/tools"
)

// A template is a VM booted once and saved, paused, right after its agent
// answered; clones of the same shape resume it instead of booting.
//
// Its guest RAM is a file QEMU mapped shared, so the save leaves the RAM
// out (QEMU's x-ignore-shared capability) and writes only the devices'
// and vCPUs' state. A clone maps the same file private: it reads the
// template's pages through the page cache, which every clone shares, and
// a page it writes becomes its own. Its disk is a qcow2 overlay of the
// template's disk as it was at the save. Nothing a clone does reaches
// the template's files, which are made read-only once saved.
//
// Templates live beside the VM boot files of their image, in
// templates/KEY, and so go with the image; KEY hashes everything the
// template was made from (templateShape). One is built at a time per
// key, under a lock, in KEY.partial, which becomes KEY only when
// complete: an interrupted build leaves a partial directory that the
// next build removes, and the run's ledger removes it on `vfleet clean`.
const (
	templatesDir = "templates"
	templateRAM  = "ram"
	templateDisk = "disk.qcow2"
	// templateState is the saved device and vCPU state.
	templateState = "state"
	templateDone  = "done"
	partialSuffix = ".partial"
)

// cloneTranslationMiB bounds TCG's translation cache in templates and
// their clones. The cache is per QEMU process and, left at QEMU's
// default, grows with every guest code path run, up to 1 GiB: in a fleet
// of idle clones it is most of each one's private memory.
const cloneTranslationMiB = 32

// agentSettle is how long a template's agent gets between its host
// connection's end and the save; it needs a few ms and at most 100 ms of
// back-off (vminit.ServeDevice), even under emulation.
const agentSettle = time.Second

// templateMAC is the NIC's address in every template: locally
// administered, and outside what netpath hands out (02:76:…), so a
// clone's NIC is found by it before it takes its own.
const templateMAC = "02:7f:00:00:00:01"

// templateShape is everything a template is made from; two guests with
// the same shape can be clones of one template.
type templateShape struct {
	QEMU        string `json:"qemu"` // the emulator binary and its version
	Machine     string `json:"machine"`
	Accel       string `json:"accel"`
	VCPUs       int    `json:"vcpus"`
	MemoryMiB   int64  `json:"memory_mib"`
	Kernel      string `json:"kernel"`
	Initramfs   string `json:"initramfs"`
	BaseDisk    string `json:"base_disk"`
	Cmdline     string `json:"cmdline"`
	NIC         bool   `json:"nic"`
	OffloadsOff bool   `json:"offloads_off"`
}

func (s templateShape) key() string {
	b, _ := json.Marshal(s) // plain fields: cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// template is a complete template's files.
type template struct {
	Key                   string
	Dir, RAM, Disk, State string
	Built                 bool // by this call, rather than found
	BuildTime, SaveTime   time.Duration
	StateBytes            int64
}

func templateIn(dir, key string) template {
	return template{Key: key, Dir: dir, RAM: filepath.Join(dir, templateRAM),
		Disk: filepath.Join(dir, templateDisk), State: filepath.Join(dir, templateState)}
}

// templateBuilder is what building a template takes from the guest that
// needs it.
type templateBuilder struct {
	qemu, qemuImg string
	cfg           launchConfig // the shape's launch: name, machine, accel, kernel, …
	env           guest.Env
}

// ensureTemplate returns the template of shape, building it when there is
// none. Guests of one shape starting together wait for one build.
func ensureTemplate(ctx context.Context, b templateBuilder, shape templateShape) (template, error) {
	key := shape.key()
	root := filepath.Join(filepath.Dir(shape.BaseDisk), templatesDir)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return template{}, err
	}
	unlock, err := flock.LockFor(ctx, filepath.Join(root, key+".lock"), "booting the VM template "+key[:8], func(h flock.Holder) {
		b.env.Say("waiting for " + h.String())
	})
	if err != nil {
		return template{}, err
	}
	defer unlock()
	t := templateIn(filepath.Join(root, key), key)
	if _, err := os.Stat(filepath.Join(t.Dir, templateDone)); err == nil {
		return t, nil
	}
	// Under the lock nobody else builds this key: what is here is the
	// leftover of a build that was interrupted.
	if err := errors.Join(os.RemoveAll(t.Dir), os.RemoveAll(t.Dir+partialSuffix)); err != nil {
		return template{}, err
	}
	b.env.Say(fmt.Sprintf("booting the VM template %s under %s, once for every clone of its shape", key[:8], shape.Accel))
	built, err := buildTemplate(ctx, b, shape, t.Dir)
	if err != nil {
		return template{}, fmt.Errorf("build the VM template: %w", err)
	}
	b.env.Say(fmt.Sprintf("VM template %s booted in %s and saved in %s", key[:8], built.BuildTime.Round(100*time.Millisecond), built.SaveTime.Round(100*time.Millisecond)))
	return built, nil
}

// buildTemplate boots the template in final's partial directory, waits
// for its agent, saves it, makes its files read-only and renames the
// directory to final. Whatever happens, its QEMU is gone when it
// returns; on failure the partial directory is too.
func buildTemplate(ctx context.Context, b templateBuilder, shape templateShape, final string) (t template, err error) {
	dir := final + partialSuffix
	t = templateIn(dir, shape.key())
	led := b.env.Ledger
	var undo guest.Teardown
	defer func() {
		if err != nil {
			err = errors.Join(err, undo.Run())
		} else {
			err = undo.Run()
		}
	}()
	entry, err := led.Record(ledger.KindDir, dir, nil)
	if err != nil {
		return t, err
	}
	undo.PushRelease(led, entry)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return t, err
	}
	// QEMU's sockets and logs go in the run's state directory: the cache
	// is too deep for a unix socket's path.
	work := filepath.Join(b.env.StateDir, "template-"+t.Key[:8])
	workEntry, err := led.Record(ledger.KindDir, work, nil)
	if err != nil {
		return t, err
	}
	undo.PushRelease(led, workEntry)
	if err := os.MkdirAll(work, 0o700); err != nil {
		return t, err
	}
	began := time.Now()
	if err := makeDisk(ctx, b.qemuImg, DiskOverlay, shape.BaseDisk, formatQCOW2, t.Disk); err != nil {
		return t, err
	}
	if err := makeSparse(t.RAM, shape.MemoryMiB<<20); err != nil {
		return t, err
	}
	state, err := os.OpenFile(t.State, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return t, err
	}
	defer state.Close()

	cfg := templateConfig(b.cfg, t, work, shape)
	m, err := startQEMU(b.qemu, cfg, nil, nil, filepath.Join(work, "qemu.log"), b.env, &undo)
	if err != nil {
		return t, err
	}
	sctx, cancel := context.WithTimeout(ctx, socketWait)
	mon, err := waitQMP(sctx, cfg.QMPSocket, m.exited)
	cancel()
	if err != nil {
		return t, bootError(m, work, cfg.ConsoleLog, err)
	}
	m.mon = mon
	client, err := waitAgent(ctx, m, cfg, readyTimeout(cfg.Accel, false))
	if err != nil {
		return t, err
	}
	// The agent serves one host connection at a time, and each clone
	// makes a new one, to which the agent must say hello: so the save
	// waits until the agent has seen this connection end and queued the
	// hello of its next session. Saved any sooner, a clone resumes an
	// agent still in this session, and its hello never comes.
	client.Close()
	if err := sleepCtx(ctx, agentSettle); err != nil {
		return t, err
	}
	t.BuildTime = time.Since(began)

	saved := time.Now()
	qctx, qcancel := context.WithTimeout(ctx, time.Minute)
	defer qcancel()
	// The save stops the vCPUs for good: pressing the power button after
	// it, or after a failed save, would only wait out powerdownWait (10 s
	// of every template's build).
	m.paused = true
	if err := mon.saveState(qctx, state); err != nil {
		return t, fmt.Errorf("save: %w", err)
	}
	t.SaveTime = time.Since(saved)
	m.stop()
	if err := state.Sync(); err != nil {
		return t, err
	}
	if fi, err := state.Stat(); err == nil {
		t.StateBytes = fi.Size()
	}
	for _, f := range []string{t.RAM, t.Disk, t.State} {
		if err := syncFile(f); err != nil {
			return t, err
		}
		if err := os.Chmod(f, 0o444); err != nil {
			return t, err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, templateDone), []byte(t.Key+"\n"), 0o444); err != nil {
		return t, err
	}
	if err := os.Rename(dir, final); err != nil {
		return t, err
	}
	done := templateIn(final, t.Key)
	done.Built, done.BuildTime, done.SaveTime, done.StateBytes = true, t.BuildTime, t.SaveTime, t.StateBytes
	return done, nil
}

// templateConfig is the launch of template t, whose sockets and logs are
// in work, made from the launch of the clone that needs it: the clone's
// machine, kernel and command line, but the template's own files, a card
// that leads nowhere, and a boot rather than a resume. Its disk is a
// qcow2 overlay whatever the clone's disk mode, and its RAM is never
// offered to KSM: the file is every clone's, and the clones merge what
// they write if they say so.
func templateConfig(clone launchConfig, t template, work string, shape templateShape) launchConfig {
	cfg := clone
	cfg.Name = "template-" + t.Key[:8]
	cfg.Disk, cfg.DiskFormat = t.Disk, formatQCOW2
	cfg.RAM = &ramFile{Path: t.RAM, Shared: true}
	cfg.Incoming, cfg.MemoryMerge = false, false
	cfg.AgentSocket, cfg.QMPSocket = filepath.Join(work, "agent.sock"), filepath.Join(work, "qmp.sock")
	cfg.ConsoleLog = filepath.Join(work, "console.log")
	cfg.NIC = nil
	if shape.NIC {
		cfg.NIC = &nicConfig{MAC: templateMAC, OffloadsOff: shape.OffloadsOff, Unplugged: true}
	}
	return cfg
}

// RemoveCaches: the VM templates of every image under stateDir.
func (kind) RemoveCaches(ctx context.Context, stateDir string) ([]string, error) {
	dirs, err := image.VMBootDirs(stateDir)
	if err != nil {
		return nil, fmt.Errorf("remove VM templates: %w", err)
	}
	var out []string
	for _, dir := range dirs {
		removed, err := removeTemplates(ctx, dir)
		for _, r := range removed {
			out = append(out, "VM template "+r)
		}
		if err != nil {
			return out, fmt.Errorf("remove VM templates: %w", err)
		}
	}
	return out, nil
}

// removeTemplates removes every template kept beside the VM boot files in
// bootDir, complete or half-made, each under its lock so that a build in
// progress is waited for rather than cut short. Clones running from a
// template keep its files open and run on; new clones build it anew.
func removeTemplates(ctx context.Context, bootDir string) (removed []string, err error) {
	root := filepath.Join(bootDir, templatesDir)
	locks, err := filepath.Glob(filepath.Join(root, "*.lock"))
	if err != nil {
		return nil, err
	}
	for _, lock := range locks {
		dir := strings.TrimSuffix(lock, ".lock")
		unlock, err := flock.Lock(ctx, lock)
		if err != nil {
			return removed, err
		}
		for _, d := range []string{dir, dir + partialSuffix} {
			if _, err := os.Stat(d); err != nil {
				continue
			}
			if err := os.RemoveAll(d); err != nil {
				unlock()
				return removed, err
			}
			removed = append(removed, d)
		}
		// The lock file stays: a builder waiting on it holds it open, and
		// a new one beside it would let two builds of one key run at once.
		unlock()
	}
	return removed, nil
}

// waitAgent waits for the agent of a VM that is booting or resuming.
func waitAgent(ctx context.Context, m *vm, cfg launchConfig, timeout time.Duration) (*agent.Client, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	go func() {
		select {
		case <-m.exited:
			cancel() // QEMU is gone: stop waiting for its agent
		case <-rctx.Done():
		}
	}()
	dial := m.dialAgent
	if dial == nil {
		dial = agent.UnixDialer(cfg.AgentSocket)
	}
	client, err := agent.WaitReadyWith(rctx, dial)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, bootError(m, filepath.Dir(cfg.AgentSocket), cfg.ConsoleLog,
			fmt.Errorf("agent not ready within %s under %s", timeout, cfg.Accel))
	}
	m.booted = true
	return client, nil
}

// makeSparse creates a file of size bytes that holds no blocks yet.
func makeSparse(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	return errors.Join(f.Truncate(size), f.Close())
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// qemuIdentity names the emulator for a template's key: its path and
// version, so an upgrade makes new templates (a saved state is only
// promised to load into the QEMU that wrote it).
func qemuIdentity(ctx context.Context, t tools.Tool) string {
	v, err := tools.Version(ctx, t)
	if err != nil {
		v = "unknown"
	}
	return t.Path + " " + v
}

// becomeTimeout bounds a clone's taking on its identity: a few syscalls,
// and the NIC, which is there already.
const becomeTimeout = 15 * time.Second

// become gives a freshly resumed clone its own identity through its
// agent (vminit.Become): name, clock, randomness and network.
func (g *Guest) become(ctx context.Context, client *agent.Client) error {
	id := vminit.Identity{Hostname: g.Spec().Name, Seed: make([]byte, 64), UnixNano: time.Now().UnixNano()}
	if _, err := rand.Read(id.Seed); err != nil {
		return err
	}
	if g.nic != nil {
		id.Net, id.TemplateMAC = g.nic.String(), templateMAC
	}
	arg, err := json.Marshal(id)
	if err != nil {
		return err
	}
	bctx, cancel := context.WithTimeout(ctx, becomeTimeout)
	defer cancel()
	if _, err := client.Do(bctx, agent.Request{Op: vminit.OpBecome, Arg: string(arg)}); err != nil {
		return fmt.Errorf("clone: take on its identity: %w", err)
	}
	return nil
}

// cloneDetails is what a clone's record says of its template.
func cloneDetails(t template) map[string]string {
	d := map[string]string{"launch": LaunchClone, "template": t.Dir, "template_key": t.Key,
		"template_built": strconv.FormatBool(t.Built), "tcg_translation_mib": strconv.Itoa(cloneTranslationMiB)}
	if t.Built {
		d["template_boot"] = t.BuildTime.String()
		d["template_save"] = t.SaveTime.String()
		d["template_state_bytes"] = strconv.FormatInt(t.StateBytes, 10)
	}
	return d
}
