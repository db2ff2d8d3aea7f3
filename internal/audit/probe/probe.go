// Package probe gathers the raw evidence of a process's isolation: files
// it reads, devices it opens and closes, a read-only system call, TCP
// handshakes to named addresses. The agent runs it inside each guest and
// vfleet on the host; package audit compares the two. No probe changes the
// guest or the host: nothing is written, no device is read from or
// configured, and a connection is closed as soon as the handshake is
// answered.
//
// It is linked into the static agent, so it uses nothing but the standard
// library and x/sys.
package probe

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vfleet/vfleet/internal/audit/attack"
	"github.com/vfleet/vfleet/internal/procfs"
)

// ProbeArg is the agent's argument that runs the probes and prints the
// evidence as JSON: `vfleet-agent audit [NAME=ADDR:PORT ...]`.
const ProbeArg = "audit"

// Evidence is what one process saw, raw, as the kernel told it.
type Evidence struct {
	Status string `json:"status"`  // /proc/self/status
	UIDMap string `json:"uid_map"` // /proc/self/uid_map
	LSM    string `json:"lsm"`     // /proc/self/attr/current, or why it could not be read
	BootID string `json:"boot_id"` // /proc/sys/kernel/random/boot_id
	// BootTime is the kernel's boot time (btime of /proc/stat), which a
	// container cannot be given another of: LXC gives each container a
	// boot_id of its own.
	BootTime        string            `json:"btime,omitempty"`
	Kernel          string            `json:"kernel"`           // /proc/sys/kernel/osrelease
	Uname           string            `json:"uname,omitempty"`  // uname(2)'s release and version
	Namespaces      map[string]string `json:"namespaces"`       // /proc/self/ns/NAME -> its link
	Devices         map[string]string `json:"devices"`          // device -> "ok" or why it did not open
	Writable        map[string]string `json:"writable"`         // kernel setting -> "ok" or why it is not writable
	Keyctl          string            `json:"keyctl"`           // a read-only keyctl: "ok" or its error
	Processes       int               `json:"processes"`        // entries of /proc that are processes
	Partitions      string            `json:"partitions"`       // /proc/partitions
	ModulesDisabled string            `json:"modules_disabled"` // /proc/sys/kernel/modules_disabled
	RootMount       string            `json:"root_mount"`       // the mountinfo line of /
	Reach           map[string]string `json:"reach,omitempty"`  // target name -> "reachable" or why not
	// RootID is the root directory's attack.FileID: an escape attempt that
	// reached the host's root shows it.
	RootID string `json:"root_id,omitempty"`
	// Attacks are the escape attempts' results, when they were asked for.
	Attacks []attack.Attempt `json:"attacks,omitempty"`
	// LinksIntoRoot, in the host's own evidence only, are the interfaces
	// of the run's namespaces whose other end is in the host's network
	// namespace (vfleet reads them from outside, with netlink).
	LinksIntoRoot []string `json:"links_into_root,omitempty"`
}

// Devices whose opening would let a guest reach past its isolation: KVM,
// physical memory, the kernel's log, new network devices. Block devices
// named by /proc/partitions are tried too.
var probedDevices = []string{"/dev/kvm", "/dev/mem", "/dev/kmsg", "/dev/net/tun"}

// Kernel settings whose writability matters: the core dump handler (the
// classic way out of a container), sysrq, the page cache, KSM, and the
// root cgroup's processes under v2 and v1.
var probedSettings = []string{"/proc/sys/kernel/core_pattern", "/proc/sysrq-trigger", "/proc/sys/vm/drop_caches",
	"/sys/kernel/mm/ksm/run", "/sys/fs/cgroup/cgroup.procs", "/sys/fs/cgroup/cpu/cgroup.procs"}

// maxBlockDevices bounds how many of /proc/partitions' devices are opened.
const maxBlockDevices = 4

// Reachable is a target's verdict when it answered the handshake.
const Reachable = "reachable"

// Targets every guest on a network tries, beside the other guests.
const (
	TargetPeer     = "peer"
	TargetHostSide = "host side"
	// TargetRoot is the host's own network namespace, which no data path
	// connects to: it is judged from the namespaces, never probed with
	// traffic.
	TargetRoot = "root namespace"
)

// ReachTimeout bounds each reachability probe: a handshake on a test
// network answers in well under a millisecond, a dropped one never.
const ReachTimeout = time.Second

// Collect gathers the evidence of the calling process. targets names
// addresses (host:port) to try a TCP handshake with.
func Collect(ctx context.Context, targets map[string]string) Evidence {
	e := Evidence{
		Status: readText("/proc/self/status"), UIDMap: readText("/proc/self/uid_map"), LSM: readText("/proc/self/attr/current"),
		BootID: strings.TrimSpace(readText("/proc/sys/kernel/random/boot_id")), Kernel: strings.TrimSpace(readText("/proc/sys/kernel/osrelease")),
		Partitions: readText("/proc/partitions"), ModulesDisabled: strings.TrimSpace(readText("/proc/sys/kernel/modules_disabled")),
		Namespaces: map[string]string{}, Devices: map[string]string{}, Writable: map[string]string{},
	}
	for _, line := range strings.Split(readText("/proc/stat"), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			e.BootTime = strings.TrimSpace(v)
		}
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		e.Uname = unix.ByteSliceToString(u.Release[:]) + " " + unix.ByteSliceToString(u.Version[:])
	}
	for _, ns := range []string{"cgroup", "ipc", "mnt", "net", "pid", "time", "user", "uts"} {
		if link, err := os.Readlink("/proc/self/ns/" + ns); err == nil {
			e.Namespaces[ns] = link
		}
	}
	devices := append([]string(nil), probedDevices...)
	for i, name := range PartitionNames(e.Partitions) {
		if i == maxBlockDevices {
			break
		}
		devices = append(devices, "/dev/"+name)
	}
	for _, d := range devices {
		e.Devices[d] = outcome(openClose(d))
	}
	for _, p := range probedSettings {
		e.Writable[p] = outcome(unix.Faccessat(unix.AT_FDCWD, p, unix.W_OK, unix.AT_EACCESS))
	}
	_, err := unix.KeyctlInt(unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_SESSION_KEYRING, 0, 0, 0)
	e.Keyctl = outcome(err)
	if ents, err := os.ReadDir("/proc"); err == nil {
		for _, ent := range ents {
			if strings.Trim(ent.Name(), "0123456789") == "" {
				e.Processes++
			}
		}
	}
	e.RootMount = rootMount(readText("/proc/self/mountinfo"))
	var root unix.Stat_t
	if err := unix.Stat("/", &root); err == nil {
		e.RootID = attack.FileID(root)
	}
	if len(targets) > 0 {
		e.Reach = reach(ctx, targets)
	}
	return e
}

// RunProbe is the agent's audit: the targets come as NAME=ADDR:PORT
// arguments, after attack.Arg when the escape attempts are to be made too
// (in the working directory); the evidence goes out as JSON.
func RunProbe(args []string, out io.Writer) error {
	attacks := len(args) > 0 && args[0] == attack.Arg
	if attacks {
		args = args[1:]
	}
	targets := map[string]string{}
	for _, a := range args {
		name, addr, ok := strings.Cut(a, "=")
		if !ok {
			return errors.New("audit: want targets as NAME=ADDR:PORT, got " + a)
		}
		targets[name] = addr
	}
	e := Collect(context.Background(), targets)
	if attacks {
		e.Attacks = attack.Run(context.Background(), ".")
	}
	return json.NewEncoder(out).Encode(e)
}

func readText(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "error: " + attack.ErrText(err)
	}
	return string(b)
}

// openClose opens a device without reading it and closes it at once;
// O_NONBLOCK keeps a terminal or a tape from waiting.
func openClose(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	return attack.ErrText(err)
}

// PartitionNames are the devices /proc/partitions lists.
func PartitionNames(partitions string) []string {
	var names []string
	for _, p := range procfs.ParsePartitions(partitions) {
		names = append(names, p.Name)
	}
	return names
}

// rootMount is the mountinfo line of the file system mounted at / last,
// the one the process sees.
func rootMount(mountinfo string) string {
	root := ""
	for _, line := range strings.Split(mountinfo, "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == "/" {
			root = line
		}
	}
	return root
}

// reach tries a TCP handshake with every target at once. A refusal is an
// answer: the address is reachable, nothing listens on the port.
func reach(ctx context.Context, targets map[string]string) map[string]string {
	out := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	names := make([]string, 0, len(targets))
	for name := range targets {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		wg.Add(1)
		go func(name, addr string) {
			defer wg.Done()
			d := net.Dialer{Timeout: ReachTimeout}
			conn, err := d.DialContext(ctx, "tcp", addr)
			verdict := Reachable
			switch {
			case err == nil:
				conn.Close()
			case errors.Is(err, syscall.ECONNREFUSED):
			default:
				verdict = "unreachable: " + reachError(err)
			}
			mu.Lock()
			out[name] = verdict
			mu.Unlock()
		}(name, targets[name])
	}
	wg.Wait()
	return out
}

func reachError(err error) string {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "no answer in " + ReachTimeout.String()
	}
	return attack.ErrText(err)
}
