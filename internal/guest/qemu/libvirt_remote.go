package qemu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/remote"
)

// kindLibvirtPool is the ledger's entry for the storage pool vfleet makes
// for a guest on a remote libvirt: its id is the pool's name, its data the
// URI and the host key the run met there. The pool's volumes are its
// directory's files, so the entry covers them before each is made.
const kindLibvirtPool = "libvirt-pool"

func init() { ledger.RegisterUndo(kindLibvirtPool, undoLibvirtPool) }

// remoteLibvirtDir holds, on a remote libvirt's host, the directory of
// each pool vfleet makes; vfleet makes nothing else there.
const remoteLibvirtDir = "/var/lib/vfleet/libvirt"

// ErrLibvirtHost says what a remote libvirt's host cannot run.
var ErrLibvirtHost = errors.New("libvirt host")

// libvirtConn is a connection to a libvirt, and for a remote one the SSH
// connection it runs through, which reads the host's files too.
type libvirtConn struct {
	*libvirt.Libvirt
	uri     libvirtURI
	machine *remote.Machine // nil for this host's libvirt
}

// sshSocket is go-libvirt's dialer of a remote libvirt's socket: a
// channel of the SSH connection, as libvirt's own ssh transport reaches
// it (there through a relay program, such as nc).
type sshSocket struct {
	m    *remote.Machine
	path string
}

func (s sshSocket) Dial() (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), libvirtDial)
	defer cancel()
	c, err := s.m.DialUnix(ctx, s.path)
	if err != nil {
		return nil, fmt.Errorf("libvirt's socket %s on %s: %w", s.path, s.m.Target, err)
	}
	return c, nil
}

// dialRemoteLibvirt reaches a remote libvirt over SSH; hostKey, when set,
// is the key the host must present (what the ledger recorded).
func dialRemoteLibvirt(ctx context.Context, u libvirtURI, hostKey string) (*libvirtConn, error) {
	cfg := u.SSH
	cfg.Fingerprint = hostKey
	m, err := remote.Dial(ctx, u.Target, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrLibvirt, u.URI, err)
	}
	l := libvirt.NewWithDialer(sshSocket{m: m, path: u.Socket})
	// The daemon there is that host's own system libvirt.
	if err := l.ConnectToURI(libvirt.QEMUSystem); err != nil {
		m.Close(ctx)
		return nil, fmt.Errorf("%w: connect to %s (is libvirtd or virtqemud running there?): %w", ErrLibvirt, u.URI, err)
	}
	return &libvirtConn{Libvirt: l, uri: u, machine: m}, nil
}

// Close hangs up libvirt, then the SSH connection under it.
func (c *libvirtConn) Close() error {
	err := c.Disconnect()
	if c.machine != nil {
		err = errors.Join(err, c.machine.Close(context.Background()))
	}
	return err
}

// readFile reads a file of libvirt's host.
func (c *libvirtConn) readFile(ctx context.Context, file string) ([]byte, error) {
	if c.machine == nil {
		return os.ReadFile(file)
	}
	return c.machine.Run(ctx, nil, "cat", "--", file)
}

// removeFile removes a file of libvirt's host; one already gone is fine.
func (c *libvirtConn) removeFile(ctx context.Context, file string) error {
	if c.machine == nil {
		if err := os.Remove(file); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	_, err := c.machine.Run(ctx, nil, "rm", "-f", "--", file)
	return err
}

// remoteAccel chooses the accelerator of a guest on a remote libvirt
// from what that libvirt says it runs: vfleet's boot probe runs QEMU
// here, and says nothing of another host's KVM.
func remoteAccel(c *libvirtConn, want string) (accel, why string, err error) {
	doc, err := c.ConnectGetCapabilities()
	if err != nil {
		return "", "", fmt.Errorf("%w: capabilities of %s: %w", ErrLibvirt, c.uri.URI, err)
	}
	var caps libvirtxml.Caps
	if err := caps.Unmarshal(doc); err != nil {
		return "", "", fmt.Errorf("%w: capabilities of %s: %w", ErrLibvirt, c.uri.URI, err)
	}
	return accelOfCaps(caps, want, c.uri.URI)
}

// accelOfCaps is remoteAccel's choice from the host's capabilities.
func accelOfCaps(caps libvirtxml.Caps, want, uri string) (accel, why string, err error) {
	var types []string
	for _, g := range caps.Guests {
		if g.OSType == "hvm" && g.Arch.Name == "x86_64" {
			for _, d := range g.Arch.Domains {
				types = append(types, d.Type)
			}
		}
	}
	kvm := slices.Contains(types, "kvm")
	switch {
	case len(types) == 0:
		return "", "", fmt.Errorf("%w: %s runs no x86_64 guests", ErrLibvirtHost, uri)
	case want == AccelKVM && !kvm:
		return "", "", fmt.Errorf("%w: accel kvm: %s offers no kvm domains (%s): use accel tcg or auto", ErrLibvirtHost, uri, strings.Join(types, ", "))
	case want == AccelTCG:
		return AccelTCG, "asked for", nil
	case kvm:
		return AccelKVM, "the remote libvirt offers kvm domains", nil
	}
	return AccelTCG, "the remote libvirt offers no kvm domains", nil
}

// checkRemoteLibvirt refuses what a guest on another host's libvirt
// cannot do, before anything starts.
func checkRemoteLibvirt(spec guest.Spec, env guest.Env) error {
	switch {
	case spec.Tap != nil:
		return errRemoteNIC
	case spec.PinVCPUs != "" || spec.RTPriority > 0:
		return errors.New("pin_vcpus and rt_priority name this host's CPUs, not the remote host's: remove them (or the run's pinning), or use " + LibvirtSystem)
	case spec.Own.Text(fieldDisk) != "" && spec.Own.Text(fieldDisk) != DiskOverlay:
		return fmt.Errorf("disk %s: a remote guest's disk is a qcow2 overlay over the uploaded base: use disk overlay", spec.Own.Text(fieldDisk))
	case spec.Image != "":
		return errors.New("a user's disk is not uploaded to a remote host yet: boot vfleet's image there, or use " + LibvirtSystem)
	case env.Detached:
		return errors.New("a fleet's later commands reach a VM's agent at its socket on this host, and a remote guest's is on its own: run the scenario instead of fleet up, or use " + LibvirtSystem)
	}
	return nil
}

// remoteHostDetails says which host a remote guest ran on, for its
// record: the name, key, CPUs and memory its libvirt reports, and how far
// its clock is from this host's (measured through the guest's agent, as
// the start gate measures it, so the record says what a step's start
// moments were translated by).
func remoteHostDetails(ctx context.Context, c *libvirtConn, client *agent.Client) (map[string]string, error) {
	name, err := c.ConnectGetHostname()
	if err != nil {
		return nil, fmt.Errorf("%w: hostname of %s: %w", ErrLibvirt, c.uri.URI, err)
	}
	model, memKiB, cpus, _, _, _, _, _, err := c.NodeGetInfo()
	if err != nil {
		return nil, fmt.Errorf("%w: node info of %s: %w", ErrLibvirt, c.uri.URI, err)
	}
	offset, rtt, err := agent.ClockOffset(ctx, client.Do)
	if err != nil {
		return nil, fmt.Errorf("clock of %s: %w", c.uri.Target, err)
	}
	return map[string]string{
		"libvirt_host": name, "libvirt_host_key": c.machine.HostKey,
		"libvirt_host_cpus": strconv.Itoa(int(cpus)), "libvirt_host_cpu_model": cString(model[:]),
		"libvirt_host_memory_mib": strconv.FormatUint(memKiB>>10, 10),
		"clock_offset_us":         strconv.FormatInt(offset.Microseconds(), 10),
		"clock_rtt_us":            strconv.FormatInt(rtt.Microseconds(), 10),
	}, nil
}

// cString is libvirt's fixed-size, NUL-padded string.
func cString(b []int8) string {
	var out []byte
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}

// errRemoteNIC refuses a remote guest a NIC on the run's path.
var errRemoteNIC = errors.New("a NIC on the run's path is not possible on another host: the path is on this one; remove network, or use " + LibvirtSystem)

// validPoolName: a pool's name is a domain's, one path element, so that
// its directory is one of remoteLibvirtDir's own.
func validPoolName(name string) bool {
	return strings.HasPrefix(name, "vfleet-") && !strings.ContainsAny(name, "/\x00") && name != "." && name != ".."
}

// stageRemote puts on the remote host what the guest's domain opens, as
// volumes of a transient directory pool of the guest's own: the kernel,
// the initramfs and the base disk uploaded, the guest's qcow2 overlay made
// there by libvirt over the uploaded base. cfg then names the host's
// files, its console log and agent socket in the pool's directory too.
// Uploads are per guest, not cached across runs: what is left on the
// host is then only ever a run's own, which its ledger removes.
func stageRemote(ctx context.Context, c *libvirtConn, name, qemuImg, base, baseFormat string, cfg *launchConfig, led *ledger.Ledger, undo *guest.Teardown) error {
	dir := path.Join(remoteLibvirtDir, name)
	entry, err := led.Record(kindLibvirtPool, name, map[string]string{"uri": c.uri.URI, "host_key": c.machine.HostKey})
	if err != nil {
		return err
	}
	undo.PushRelease(led, entry)
	if _, err := c.machine.Run(ctx, nil, "mkdir", "-p", "--", dir); err != nil {
		return fmt.Errorf("%w: make %s on %s: %w", ErrLibvirt, dir, c.uri.Target, err)
	}
	doc, err := (&libvirtxml.StoragePool{Type: "dir", Name: name, Target: &libvirtxml.StoragePoolTarget{Path: dir}}).Marshal()
	if err != nil {
		return err
	}
	pool, err := c.StoragePoolCreateXML(doc, 0)
	if err != nil {
		return fmt.Errorf("%w: create pool %s: %w", ErrLibvirt, name, err)
	}
	disk, err := image.InspectDisk(ctx, qemuImg, base)
	if err != nil {
		return err
	}
	if cfg.Kernel, err = uploadVolume(ctx, c, pool, "kernel", cfg.Kernel); err != nil {
		return err
	}
	if cfg.Initramfs != "" {
		if cfg.Initramfs, err = uploadVolume(ctx, c, pool, "initramfs", cfg.Initramfs); err != nil {
			return err
		}
	}
	remoteBase, err := uploadVolume(ctx, c, pool, "base."+baseFormat, base)
	if err != nil {
		return err
	}
	overlay := libvirtxml.StorageVolume{
		Name:     "disk." + formatQCOW2,
		Capacity: &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: uint64(disk.VirtualSize)},
		Target:   &libvirtxml.StorageVolumeTarget{Format: &libvirtxml.StorageVolumeTargetFormat{Type: formatQCOW2}},
		BackingStore: &libvirtxml.StorageVolumeBackingStore{Path: remoteBase,
			Format: &libvirtxml.StorageVolumeTargetFormat{Type: baseFormat}},
	}
	if cfg.Disk, err = createVolume(c, pool, overlay); err != nil {
		return err
	}
	cfg.DiskFormat = formatQCOW2
	cfg.ConsoleLog, cfg.AgentSocket = path.Join(dir, "console.log"), path.Join(dir, "agent.sock")
	return nil
}

// uploadVolume copies a local file into a new volume of the pool, as it
// is (libvirt holds it as raw bytes), and returns its path on the host.
// It stops when ctx ends: a Ctrl-C need not wait for a base disk's last
// byte.
func uploadVolume(ctx context.Context, c *libvirtConn, pool libvirt.StoragePool, name, local string) (string, error) {
	f, err := os.Open(local)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	size := uint64(st.Size())
	vol := libvirtxml.StorageVolume{
		Name: name, Capacity: &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: size},
		Allocation: &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: 0},
		Target:     &libvirtxml.StorageVolumeTarget{Format: &libvirtxml.StorageVolumeTargetFormat{Type: formatRaw}},
	}
	p, err := createVolume(c, pool, vol)
	if err != nil {
		return "", err
	}
	v, err := c.StorageVolLookupByName(pool, name)
	if err != nil {
		return "", fmt.Errorf("%w: volume %s: %w", ErrLibvirt, name, err)
	}
	if err := c.StorageVolUpload(v, ctxReader{ctx, f}, 0, size, 0); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("%w: upload %s to %s: %w", ErrLibvirt, local, c.uri.URI, err)
	}
	return p, nil
}

// createVolume makes a volume of the pool and returns its path.
func createVolume(c *libvirtConn, pool libvirt.StoragePool, vol libvirtxml.StorageVolume) (string, error) {
	doc, err := vol.Marshal()
	if err != nil {
		return "", err
	}
	v, err := c.StorageVolCreateXML(pool, doc, 0)
	if err != nil {
		return "", fmt.Errorf("%w: create volume %s: %w", ErrLibvirt, vol.Name, err)
	}
	p, err := c.StorageVolGetPath(v)
	if err != nil {
		return "", fmt.Errorf("%w: volume %s: %w", ErrLibvirt, vol.Name, err)
	}
	return p, nil
}

// undoLibvirtPool stops the guest's transient pool, which libvirt then
// forgets with its volumes, and removes the pool's directory: the
// volumes' files, and the console log and agent socket beside them.
func undoLibvirtPool(ctx context.Context, e ledger.Entry) error {
	if !validPoolName(e.ID) {
		return fmt.Errorf("%w: ledger names pool %q, which is none of vfleet's", ErrLibvirt, e.ID)
	}
	u, err := parseLibvirtURI(e.Data["uri"])
	if err != nil {
		return err
	}
	if !u.Remote {
		return fmt.Errorf("%w: ledger names pool %s at %s: vfleet makes pools on remote hosts only", ErrLibvirt, e.ID, u.URI)
	}
	c, err := dialRemoteLibvirt(ctx, u, e.Data["host_key"])
	if err != nil {
		return err
	}
	defer c.Close()
	pool, err := c.StoragePoolLookupByName(e.ID)
	switch {
	case noPool(err):
	case err != nil:
		return fmt.Errorf("%w: look up pool %s: %w", ErrLibvirt, e.ID, err)
	default:
		if err := c.StoragePoolDestroy(pool); err != nil && !noPool(err) {
			return fmt.Errorf("%w: destroy pool %s: %w", ErrLibvirt, e.ID, err)
		}
	}
	dir := path.Join(remoteLibvirtDir, e.ID)
	if _, err := c.machine.Run(ctx, nil, "rm", "-rf", "--", dir); err != nil {
		return fmt.Errorf("%w: remove %s on %s: %w", ErrLibvirt, dir, u.Target, err)
	}
	return nil
}

// noPool says libvirt knows no such pool (one already gone).
func noPool(err error) bool {
	var le libvirt.Error
	return errors.As(err, &le) && le.Code == uint32(libvirt.ErrNoStoragePool)
}

// ctxReader reads r until ctx ends; libvirt's stream then aborts.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
