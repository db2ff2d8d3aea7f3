package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/hostinfo"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/runner"
	"github.com/vfleet/vfleet/internal/scenario"
	"github.com/vfleet/vfleet/internal/store"
	"github.com/vfleet/vfleet/internal/testutil"
)

// probingKind records the runtimes it was probed for, refuses "none" and
// does not support "absent".
type probingKind struct {
	name   string
	traits guest.Traits
	probed []string
}

func (k *probingKind) Name() string         { return k.name }
func (k *probingKind) Traits() guest.Traits { return k.traits }
func (k *probingKind) Probe(_ context.Context, runtime string) error {
	k.probed = append(k.probed, runtime)
	switch runtime {
	case "none":
		return errNoRuntime
	case "absent":
		return fmt.Errorf("%w: absent is not installed", guest.ErrNotSupported)
	}
	return nil
}
func (k *probingKind) New(guest.Spec, guest.Env) (guest.Guest, error) {
	return nil, errors.New("not for starting")
}

var (
	errNoRuntime = errors.New("no such runtime")
	probed       = &probingKind{name: "session-probed"}
	inGuest      = &probingKind{name: "session-vm", traits: guest.Traits{AgentInGuest: true, BootsDisk: true}}
	// sandboxed's agent is in its guest's memory too, but its image is an
	// OCI image, as gVisor's is.
	sandboxed = &probingKind{name: "session-sandboxed", traits: guest.Traits{AgentInGuest: true}}
)

func init() {
	guest.Register(probed)
	guest.Register(inGuest)
	guest.Register(sandboxed)
}

// Prepare refuses a kind the host cannot run before it builds anything:
// no agent is needed to learn that.
func TestPrepareProbesBeforeBuilding(t *testing.T) {
	cfg := Config{StateDir: t.TempDir(), AgentPath: filepath.Join(t.TempDir(), "no-agent")}
	spec := &scenario.Spec{Guests: []scenario.GuestGroup{{Name: "g", Spec: guest.Spec{Kind: probed.name, Runtime: "none"}}}}
	if _, err := Prepare(context.Background(), cfg, spec); !errors.Is(err, errNoRuntime) {
		t.Fatalf("Prepare = %v; want the probe's refusal", err)
	}
}

func TestAgentBinaryIsTheFlagOrBesideVfleetWithTheArchAppended(t *testing.T) {
	dir := t.TempDir()
	agent := filepath.Join(dir, "vfleet-agent")
	other := "riscv64"
	if other == image.HostArch {
		other = "s390x"
	}
	if _, err := AgentBinary(agent, image.HostArch); err == nil || !strings.Contains(err.Error(), agent+" not found (the "+image.HostArch+" agent)") {
		t.Fatalf("a missing agent: %v", err)
	}
	for _, p := range []string{agent, agent + "-" + other} {
		if err := os.WriteFile(p, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if p, err := AgentBinary(agent, image.HostArch); err != nil || p != agent {
		t.Fatalf("the host's agent: %q, %v", p, err)
	}
	if p, err := AgentBinary(agent, other); err != nil || p != agent+"-"+other {
		t.Fatalf("the %s agent: %q, %v", other, p, err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AgentBinary("", image.HostArch); err == nil || !strings.Contains(err.Error(), filepath.Join(filepath.Dir(self), "vfleet-agent")) {
		t.Fatalf("no flag: %v; want the agent looked for beside the executable", err)
	}
}

// A VM's user image is its disk, booted as it is: nothing is unpacked,
// yet the agent it gets brought in must be there.
func TestPrepareGuestImagesLeavesAVMDiskAloneAndFindsTheAgent(t *testing.T) {
	agent := filepath.Join(t.TempDir(), "vfleet-agent")
	cfg := Config{StateDir: t.TempDir(), AgentPath: agent}
	specs := []*scenario.Spec{{Guests: []scenario.GuestGroup{
		{Name: "plain", Spec: guest.Spec{Kind: inGuest.name}},
		{Name: "disk", Spec: guest.Spec{Kind: inGuest.name, Image: "/disks/a.qcow2"}},
	}}, {Guests: []scenario.GuestGroup{{Name: "again", Spec: guest.Spec{Kind: inGuest.name, Image: "/disks/a.qcow2"}}}}}
	if _, err := prepareGuestImages(context.Background(), cfg, specs); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("without the agent: %v", err)
	}
	if err := os.WriteFile(agent, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := prepareGuestImages(context.Background(), cfg, specs)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]runner.UserImage{"/disks/a.qcow2": {}}; !reflect.DeepEqual(got.users, want) || got.agentBinary != agent || len(got.variants) != 0 {
		t.Fatalf("guest images %+v; want the disk as it is and agent %s", got, agent)
	}
	// A kind whose agent is in its guest but that boots no disk of its own
	// runs an OCI image, which this path is not.
	sandboxedSpecs := []*scenario.Spec{{Guests: []scenario.GuestGroup{{Name: "oci", Spec: guest.Spec{Kind: sandboxed.name, Image: "/disks/a.qcow2"}}}}}
	if got, err := prepareGuestImages(context.Background(), cfg, sandboxedSpecs); err == nil {
		t.Fatalf("an OCI image that is not one was taken as a disk: %+v", got)
	}
	// Without users' images no agent is looked for.
	got, err = prepareGuestImages(context.Background(), Config{AgentPath: filepath.Join(t.TempDir(), "none")}, nil)
	if err != nil || got.agentBinary != "" {
		t.Fatalf("no images: %+v, %v", got, err)
	}
}

func TestFingerprintRecordsTheImagesToolsAndVfleetsOwnPrograms(t *testing.T) {
	if _, err := hostinfo.Collect(hostinfo.Options{}); err != nil {
		t.Skipf("no host fingerprint here: %v", err)
	}
	img := &image.Image{Manifest: image.Manifest{Hash: "abc", Packages: map[string]string{"fio": "3.33-1", "bash": "5.2"}}}
	fp, err := fingerprint(context.Background(), img, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"fio": "3.33-1", "image": "abc"}; !reflect.DeepEqual(fp.ToolVersions, want) || fp.VfleetVer == "" {
		t.Fatalf("tool versions %v (vfleet %q); want %v: the measuring packages and the image only", fp.ToolVersions, fp.VfleetVer, want)
	}
	img.Manifest.Recipe.Programs = "h"
	fp, err = fingerprint(context.Background(), img, nil)
	if err != nil {
		t.Fatal(err)
	}
	own := 0
	for _, v := range fp.ToolVersions {
		if strings.HasPrefix(v, "vfleet's own, source ") {
			own++
		}
	}
	if own == 0 {
		t.Fatalf("tool versions %v: vfleet's own programs are missing", fp.ToolVersions)
	}
}

func TestOptionsAbortsOrphansAndCarriesThePreparedImages(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dead := testutil.DeadProcess(t)
	id, err := st.CreateRun(ctx, &store.Run{Owner: dead, ScenarioName: "killed", ScenarioText: []byte("x"), Baseline: "host"})
	if err != nil {
		t.Fatal(err)
	}
	var warnings bytes.Buffer
	s := &Session{
		cfg:    Config{StateDir: "/state", Warnings: &warnings},
		img:    &image.Image{RootFS: "/rootfs", AgentPath: "/agent"},
		images: guestImages{users: map[string]runner.UserImage{"u": {RootFS: "/u"}}, agentBinary: "/bin/agent"},
		host:   hostinfo.Fingerprint{Hostname: "h"},
	}
	opts := s.Options(ctx, st)
	if opts.Store != st || opts.StateRoot != "/state" || opts.RootFS != "/rootfs" || opts.AgentPath != "/agent" ||
		opts.AgentBinary != "/bin/agent" || opts.Images["u"].RootFS != "/u" || opts.Host.Hostname != "h" {
		t.Fatalf("options %+v do not carry the session's", opts)
	}
	if r, _ := st.GetRun(ctx, id); r.Status != store.StatusAborted {
		t.Fatalf("the dead vfleet's run is %s, want aborted", r.Status)
	}
	if !strings.Contains(warnings.String(), "vfleet: run 1 (killed) was left running: marked aborted") {
		t.Fatalf("warnings %q; want the aborted run told", warnings.String())
	}
}
