package netpath

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/vfleet/vfleet/internal/ledger"
	"github.com/vfleet/vfleet/internal/tools"
)

// OVSPrograms are the Open vSwitch programs the ovs path runs, as
// internal/tools names them.
func OVSPrograms() []string {
	return []string{"ovs-vswitchd", "ovsdb-server", "ovsdb-tool", "ovs-vsctl"}
}

const (
	// ovsCommandTimeout bounds one ovs-vsctl, its wait for ovs-vswitchd to
	// apply a change included; ovs-vswitchd applies one in milliseconds.
	ovsCommandTimeout = 10 * time.Second
)

// ovsSwitch is the Open vSwitch of one run: an ovsdb-server and an
// ovs-vswitchd running in the host side, whose datapath (in the kernel, or
// in ovs-vswitchd itself) is that namespace's own, and their database,
// sockets and logs in a directory of the run's own. The system's Open
// vSwitch, its database and its service are never touched.
type ovsSwitch struct {
	sides    Sides
	led      *ledger.Ledger
	dir      string
	dirEntry ledger.Entry
	programs map[string]tools.Tool // by name
	datapath OVSDatapath
	version  string
	daemons  []*daemon // started, the database server first
}

// startOVS starts the run's Open vSwitch with one bridge on datapath dp.
// On error it has stopped what it started and removed its directory.
func startOVS(sides Sides, dp OVSDatapath) (sw *ovsSwitch, err error) {
	sw = &ovsSwitch{sides: sides, led: sides.Ledger, datapath: dp,
		dir: filepath.Join(sides.StateDir, sides.Host.name+"-ovs"), programs: map[string]tools.Tool{}}
	for _, name := range OVSPrograms() {
		if sw.programs[name], err = tools.Find(name); err != nil {
			return nil, fmt.Errorf("the ovs path runs Open vSwitch: %w", err)
		}
	}
	if sw.version, err = tools.Version(context.Background(), sw.programs["ovs-vswitchd"]); err != nil {
		return nil, err
	}
	if err := checkSocketPath("the ovs path's socket", sw.dbSocket()); err != nil {
		return nil, err
	}
	if sw.dirEntry, err = sw.led.Record(ledger.KindDir, sw.dir, nil); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, sw.stop())
			sw = nil
		}
	}()
	if err := os.Mkdir(sw.dir, 0o700); err != nil {
		return sw, fmt.Errorf("the ovs path's state directory: %w", err)
	}
	db := sw.path("conf.db")
	// Without a schema argument ovsdb-tool takes the one installed with
	// it, wherever the distribution put it.
	if _, err := sw.run("ovsdb-tool", "create", db); err != nil {
		return sw, err
	}
	server, err := sw.startDaemon("ovsdb-server", db, "--remote=punix:"+sw.dbSocket())
	if err != nil {
		return sw, err
	}
	if err := sw.awaitSocket(server); err != nil {
		return sw, err
	}
	// What ovs-vswitchd reads only at its start goes in before it starts.
	setup := []string{"--no-wait", "init"}
	if dp.Type == "netdev" {
		setup = append(setup, "--", "set", "Open_vSwitch", ".", "other_config:userspace-tso-enable=true")
	}
	if _, err := sw.vsctl(setup...); err != nil {
		return sw, err
	}
	if _, err := sw.startDaemon("ovs-vswitchd", "unix:"+sw.dbSocket()); err != nil {
		return sw, err
	}
	// ovs-vsctl waits until ovs-vswitchd has made the bridge.
	if _, err := sw.vsctl("add-br", ovsBridgeName, "--", "set", "Bridge", ovsBridgeName, "datapath_type="+dp.Type, "fail_mode=standalone"); err != nil {
		return sw, err
	}
	return sw, sw.checkInterface(ovsBridgeName)
}

func (sw *ovsSwitch) path(name string) string { return filepath.Join(sw.dir, name) }

// dbSocket is where ovsdb-server listens for ovs-vswitchd and ovs-vsctl.
func (sw *ovsSwitch) dbSocket() string { return sw.path("db.sock") }

// awaitSocket waits until the database server accepts connections:
// ovs-vsctl's own --retry would back off for a second.
func (sw *ovsSwitch) awaitSocket(server *daemon) error {
	deadline := time.Now().Add(ovsCommandTimeout)
	for {
		c, err := net.Dial("unix", sw.dbSocket())
		if err == nil {
			return c.Close()
		}
		if server.gone.Err() != nil || time.Now().After(deadline) {
			return sw.explain(fmt.Errorf("%s does not listen: %w", server.name, err))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// env points every default location of the Open vSwitch programs (run,
// database, log and configuration directories) at the run's directory,
// so nothing they find or make by default is the system's.
func (sw *ovsSwitch) env() []string {
	return []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
		"OVS_RUNDIR=" + sw.dir, "OVS_DBDIR=" + sw.dir, "OVS_LOGDIR=" + sw.dir, "OVS_SYSCONFDIR=" + sw.dir}
}

// startDaemon starts one of the Open vSwitch daemons with the run's
// directory for everything it keeps.
func (sw *ovsSwitch) startDaemon(name string, args ...string) (*daemon, error) {
	log := sw.path(name + ".log")
	args = append(args, "--pidfile="+sw.path(name+".pid"), "--unixctl="+sw.path(name+".ctl"), "--log-file="+log,
		"-vconsole:off", "-vsyslog:off")
	cmd := exec.Command(sw.programs[name].Path, args...)
	cmd.Env, cmd.Dir = sw.env(), sw.dir
	// What it prints before its log file is open (a bad argument) lands
	// in the log file too.
	d, err := startDaemon(sw.sides, name, log, cmd)
	if d != nil {
		sw.daemons = append(sw.daemons, d)
	}
	if err != nil {
		return nil, sw.explain(err)
	}
	return d, nil
}

// stop stops the daemons, newest first, and removes the directory.
func (sw *ovsSwitch) stop() error {
	var errs []error
	for i := len(sw.daemons) - 1; i >= 0; i-- {
		errs = append(errs, sw.daemons[i].stop(sw.led))
	}
	sw.daemons = nil
	errs = append(errs, sw.led.Release(context.Background(), sw.dirEntry))
	return errors.Join(errs...)
}

// explain adds to err the last words of every daemon that has exited:
// the reason a command failed is then most often in them.
func (sw *ovsSwitch) explain(err error) error {
	for _, d := range sw.daemons {
		if d.gone.Err() != nil {
			err = fmt.Errorf("%w; %s exited (%v): %s", err, d.name, d.cmd.ProcessState, lastLines(d.log, 3))
		}
	}
	return err
}

// lastLines is the end of a log file, its lines joined by " | ".
func lastLines(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// run runs an Open vSwitch program to its end, bounded in time, and ended
// early when a daemon dies: a command waiting on it would otherwise wait
// out its whole timeout.
func (sw *ovsSwitch) run(program string, args ...string) (string, error) {
	// A second more than ovs-vsctl's own timeout, so that its message wins.
	ctx, cancel := context.WithTimeout(context.Background(), ovsCommandTimeout+time.Second)
	defer cancel()
	for _, d := range sw.daemons {
		defer context.AfterFunc(d.gone, cancel)()
	}
	cmd := exec.CommandContext(ctx, sw.programs[program].Path, args...)
	cmd.Env, cmd.Dir = sw.env(), sw.dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		err = fmt.Errorf("%s %s: %w", program, strings.Join(args, " "), err)
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		return "", sw.explain(err)
	}
	return string(out), nil
}

func (sw *ovsSwitch) vsctl(args ...string) (string, error) {
	global := []string{"--db=unix:" + sw.dbSocket(), fmt.Sprintf("--timeout=%d", int(ovsCommandTimeout/time.Second))}
	return sw.run("ovs-vsctl", append(global, args...)...)
}

// addPort makes a link of the host side a port of the bridge.
func (sw *ovsSwitch) addPort(name string) error {
	if _, err := sw.vsctl("add-port", ovsBridgeName, name); err != nil {
		return err
	}
	if err := sw.checkInterface(name); err != nil {
		_, derr := sw.vsctl("del-port", ovsBridgeName, name)
		return errors.Join(err, derr)
	}
	return nil
}

// checkInterface returns why ovs-vswitchd could not open an interface:
// ovs-vsctl only warns about it, and exits 0.
func (sw *ovsSwitch) checkInterface(name string) error {
	out, err := sw.vsctl("--format=json", "--columns=ofport,error", "list", "Interface", name)
	if err != nil {
		return err
	}
	reason, err := interfaceFailure([]byte(out))
	if err != nil || reason == "" {
		return err
	}
	return fmt.Errorf("ovs-vswitchd could not make %s a port of %s: %s (its log: %s)", name, ovsBridgeName, reason, sw.path("ovs-vswitchd.log"))
}

// interfaceFailure reads the ofport and error columns of one interface
// as ovs-vsctl lists them: "" for a working port, else what went wrong.
func interfaceFailure(out []byte) (string, error) {
	rows, err := parseOVSTable(out, 2)
	if err != nil {
		return "", err
	}
	if len(rows) != 1 {
		return "", fmt.Errorf("ovs-vsctl table: %d interfaces, want 1", len(rows))
	}
	// ofport is -1 for an interface that failed, and empty before
	// ovs-vswitchd tried it.
	var ofport int
	if json.Unmarshal(rows[0][0], &ofport) == nil && ofport > 0 {
		return "", nil
	}
	if reason := ovsString(rows[0][1]); reason != "" {
		return reason, nil
	}
	return "it has no port number", nil
}

// portStats returns every interface's statistics by interface name, as
// ovs-vswitchd last wrote them into the database (every 5 s).
func (sw *ovsSwitch) portStats() (map[string]map[string]int64, error) {
	out, err := sw.vsctl("--format=json", "--columns=name,statistics", "list", "Interface")
	if err != nil {
		return nil, err
	}
	return parsePortStats([]byte(out))
}

// parsePortStats reads the name and statistics columns of every
// interface as ovs-vsctl lists them.
func parsePortStats(out []byte) (map[string]map[string]int64, error) {
	rows, err := parseOVSTable(out, 2)
	if err != nil {
		return nil, err
	}
	stats := map[string]map[string]int64{}
	for _, r := range rows {
		m, err := ovsIntMap(r[1])
		if err != nil {
			return nil, err
		}
		stats[ovsString(r[0])] = m
	}
	return stats, nil
}

// parseOVSTable reads what ovs-vsctl --format=json list prints: one row
// per record, each a cell per column asked for, in OVSDB's JSON notation.
func parseOVSTable(out []byte, columns int) ([][]json.RawMessage, error) {
	var t struct {
		Data [][]json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(out, &t); err != nil {
		return nil, fmt.Errorf("ovs-vsctl table: %w", err)
	}
	for _, r := range t.Data {
		if len(r) != columns {
			return nil, fmt.Errorf("ovs-vsctl table: a row of %d columns, want %d", len(r), columns)
		}
	}
	return t.Data, nil
}

// ovsString is a string cell; an empty optional one (["set",[]]) is "".
func ovsString(cell json.RawMessage) string {
	var s string
	_ = json.Unmarshal(cell, &s)
	return s
}

// ovsIntMap is a map cell of integers: ["map",[[key,value],…]].
func ovsIntMap(cell json.RawMessage) (map[string]int64, error) {
	var tagged [2]json.RawMessage
	var tag string
	if json.Unmarshal(cell, &tagged) != nil || json.Unmarshal(tagged[0], &tag) != nil || tag != "map" {
		return nil, fmt.Errorf("ovs-vsctl table: %s is not a map", cell)
	}
	var pairs [][2]json.RawMessage
	if err := json.Unmarshal(tagged[1], &pairs); err != nil {
		return nil, fmt.Errorf("ovs-vsctl table: map %s: %w", cell, err)
	}
	out := make(map[string]int64, len(pairs))
	for _, p := range pairs {
		var k string
		var v int64
		if json.Unmarshal(p[0], &k) != nil || json.Unmarshal(p[1], &v) != nil {
			return nil, fmt.Errorf("ovs-vsctl table: map entry %s: %s is not a string to an integer", p[0], p[1])
		}
		out[k] = v
	}
	return out, nil
}
