package scenario

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/netpath"
	"github.com/vfleet/vfleet/internal/regfile"
	"github.com/vfleet/vfleet/internal/remote"
	"github.com/vfleet/vfleet/internal/workload"
)

// Options carries what the scenario package must not import itself.
type Options struct {
	// KnownKinds are the guest kinds compiled in (guest.KindNames()).
	KnownKinds []string
	// CheckGuest, when set, asks the guest's kind whether it accepts the
	// group (a runtime it knows, limits it can apply), so such mistakes are
	// reported at the group's line rather than when the guest starts.
	CheckGuest func(GuestGroup) error
	// CheckImage, when set, says whether a guest of the spec can run its
	// Image (an existing file or directory), so an unusable one is
	// reported at its line rather than when the run unpacks it.
	CheckImage func(spec guest.Spec) error
	// Host is what CPU lists and memory sizes are checked against; nil
	// reads this machine (ThisHost).
	Host *Host
	// Elsewhere says the scenario runs on another machine, not known yet,
	// which checks CPU lists and memory sizes against itself: here they
	// are checked for their syntax only.
	Elsewhere bool
	// CheckPassthrough, when set, says whether the host can lend the
	// devices of network.passthrough (PCI addresses) to vms VMs, so a
	// host without an IOMMU, or a device it uses, is refused at the
	// field rather than when the run binds it.
	CheckPassthrough func(devices []string, vms int) error
}

// Defaults of optional fields, documented in docs/scenarios.md.
const (
	DefaultRepetitions = 3
	DefaultWarmup      = 1
	DefaultDuration    = 5 * time.Second
	// BaselineKind is the bare kind (guest.Traits.Bare) a scenario
	// compares against, and runs the peer and noise on the host as.
	BaselineKind = "host"
	// MaxCount bounds a group's count: well above the fleets vfleet is
	// meant for, low enough that a typo (count: 10000000) is caught here
	// instead of by the machine running out of memory.
	MaxCount = 4096
	// MaxCPULimit bounds cpu_limit: more CPUs than any host has means
	// nothing, and the runtimes turn it into a quota in microseconds.
	MaxCPULimit = 4096
	// MaxDuration bounds a step's duration: a day, beyond which a typo
	// (9999999h) is likelier than a measurement, and tools' timeouts of
	// twice the duration stay far from overflowing.
	MaxDuration = 24 * time.Hour
)

// parser accumulates errors while walking the node tree.
type parser struct {
	source string
	opts   Options
	errs   ErrorList
	// thisHost is ThisHost, once read.
	thisHost *Host
	// optionalAt is where each group that says optional says it.
	optionalAt map[string]*yaml.Node
	// passthroughAt is network.passthrough, nil when absent.
	passthroughAt *yaml.Node
	// uplinkAt is where network.uplink is, checked against the groups'
	// paths once they are read.
	uplinkAt *yaml.Node
	// peerAt is where network.peer is.
	peerAt *yaml.Node
}

func (p *parser) errorf(n *yaml.Node, path, format string, args ...any) {
	e := &FieldError{Source: p.source, Path: workload.Clip(path), Msg: fmt.Sprintf(format, clipValues(format, args)...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	p.errs = append(p.errs, e)
}

// Parse reads a scenario file. source names it in errors (a path, or
// "builtin:NAME").
func Parse(source string, data []byte, opts Options) (*Spec, error) {
	p := &parser{source: source, opts: opts}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, ErrorList{syntaxError(source, err)}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, ErrorList{{Source: source, Msg: "empty scenario: want a mapping with name, guests and workloads"}}
	}
	// A second document would be silently ignored by a single Decode, and
	// whatever it was meant to change would not happen.
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		p.errorf(&extra, "", "a scenario is one YAML document; remove the second one or move it to its own file")
	} else if !errors.Is(err, io.EOF) {
		p.errs = append(p.errs, syntaxError(source, err))
	}
	spec := &Spec{Source: source, Text: data, Repetitions: DefaultRepetitions, Warmup: DefaultWarmup, Duration: DefaultDuration}
	p.spec(doc.Content[0], spec)
	if len(p.errs) == 0 {
		p.checkSize(spec)
	}
	if len(p.errs) > 0 {
		return nil, p.errs
	}
	return spec, nil
}

// yaml.v3 reports syntax errors as text only, "yaml: line N: msg"; the line
// is lifted out so the error reads like every other one.
var yamlLineRE = regexp.MustCompile(`^(?:yaml: )?line (\d+): `)

func syntaxError(source string, err error) *FieldError {
	msg := err.Error()
	e := &FieldError{Source: source}
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	}
	e.Msg = "not valid YAML: " + strings.TrimPrefix(msg, "yaml: ")
	return e
}

// fields walks a mapping, calling the handler of each known key with its
// value, and reporting unknown and repeated keys. It returns the value nodes
// by key, for errors that point at a value after the walk.
func (p *parser) fields(n *yaml.Node, path string, handlers map[string]func(*yaml.Node, string)) map[string]*yaml.Node {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		p.errorf(n, path, "want a mapping of %s", strings.Join(sortedKeys(handlers), ", "))
		return nil
	}
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], deref(n.Content[i+1])
		fieldPath := joinPath(path, k.Value)
		h, ok := handlers[k.Value]
		switch {
		case !ok:
			msg := fmt.Sprintf("unknown field %q (allowed: %s)", workload.Clip(k.Value), strings.Join(sortedKeys(handlers), ", "))
			if s := suggest(k.Value, sortedKeys(handlers)); s != "" {
				msg = fmt.Sprintf("unknown field %q; did you mean %q?", workload.Clip(k.Value), s)
			}
			p.errorf(k, fieldPath, "%s", msg)
		case seen[k.Value] != nil:
			p.errorf(k, fieldPath, "given twice (first at line %d)", seen[k.Value].Line)
		default:
			seen[k.Value] = v
			h(v, fieldPath)
		}
	}
	return seen
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// deref follows a YAML alias (*name) to the node its anchor (&name) marks,
// so repeated params can be written once.
func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func (p *parser) scalar(n *yaml.Node, path string) (string, bool) {
	n = deref(n)
	if n.Kind != yaml.ScalarNode {
		p.errorf(n, path, "want a single value, not a %s", nodeKind(n))
		return "", false
	}
	return n.Value, true
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	default:
		return "value"
	}
}

func (p *parser) str(dst *string) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		if v, ok := p.scalar(n, path); ok {
			*dst = v
		}
	}
}

// oneOf reads a string that must be one of allowed.
func (p *parser) oneOf(dst *string, allowed ...string) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		v, ok := p.scalar(n, path)
		if !ok {
			return
		}
		if !contains(allowed, v) {
			p.errorf(n, path, "%q is not allowed: want one of %s", v, strings.Join(allowed, ", "))
			return
		}
		*dst = v
	}
}

// boolean reads true or false, and nothing else that might mean one
// (1, yes, on): YAML itself disagrees between versions on which do.
func (p *parser) boolean(dst *bool) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		if s, ok := p.scalar(n, path); ok {
			b, err := guest.ParseBool(s)
			if err != nil {
				p.errorf(n, path, "%v", err)
			}
			*dst = b
		}
	}
}

// integer reads a whole number in [min, max]; max is math.MaxInt when only
// the lower bound matters.
func (p *parser) integer(dst *int, min, max int) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		v, ok := p.scalar(n, path)
		if !ok {
			return
		}
		i, err := guest.ParseInt(v, min, max)
		if err != nil {
			p.errorf(n, path, "%v", err)
			return
		}
		*dst = i
	}
}

func (p *parser) duration(dst *time.Duration) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		v, ok := p.scalar(n, path)
		if !ok {
			return
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > MaxDuration {
			p.errorf(n, path, "%q is not allowed: want a positive duration of at most %gh, like 3s, 500ms or 1m", v, MaxDuration.Hours())
			return
		}
		*dst = d
	}
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

func (p *parser) name(dst *string) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		v, ok := p.scalar(n, path)
		if !ok {
			return
		}
		if !nameRE.MatchString(v) || len(v) > 40 {
			p.errorf(n, path, "%q is not allowed: want lower-case letters, digits and '-', at most 40 characters", v)
			return
		}
		*dst = v
	}
}

func (p *parser) spec(n *yaml.Node, s *Spec) {
	var guestsNode, workloadsNode, baselineNode, networkNode, adaptiveNode, fleetNode, noiseNode, hostNode *yaml.Node
	seen := p.fields(n, "", map[string]func(*yaml.Node, string){
		"network":       func(v *yaml.Node, _ string) { networkNode = v },
		"fleet":         func(v *yaml.Node, _ string) { fleetNode = v },
		"noise":         func(v *yaml.Node, _ string) { noiseNode = v },
		"host_settings": func(v *yaml.Node, _ string) { hostNode = v },
		"adaptive":      func(v *yaml.Node, _ string) { adaptiveNode = v },
		"name":          p.name(&s.Name),
		"description":   p.str(&s.Description),
		"repetitions":   p.integer(&s.Repetitions, 1, math.MaxInt),
		"warmup":        p.integer(&s.Warmup, 0, math.MaxInt),
		"duration":      p.duration(&s.Duration),
		"baseline":      func(v *yaml.Node, path string) { baselineNode = v; p.str(&s.Baseline)(v, path) },
		"guests":        func(v *yaml.Node, _ string) { guestsNode = v },
		"workloads":     func(v *yaml.Node, _ string) { workloadsNode = v },
	})
	if seen == nil {
		return
	}
	for _, required := range []string{"name", "guests", "workloads"} {
		if seen[required] == nil {
			p.errorf(n, required, "missing (required)")
		}
	}
	if networkNode != nil {
		s.Network = p.network(networkNode, s)
	}
	if adaptiveNode != nil {
		s.Adaptive = p.adaptive(adaptiveNode, s.Repetitions)
	}
	if fleetNode != nil {
		s.Fleet = p.fleet(fleetNode)
	}
	if noiseNode != nil {
		s.Noise = p.noise(noiseNode)
	}
	if hostNode != nil {
		s.HostSettings = p.hostSettings(hostNode)
	}
	if guestsNode != nil {
		p.guests(guestsNode, s)
	}
	p.checkUplink(s)
	if workloadsNode != nil {
		p.workloads(workloadsNode, s)
	}
	p.baseline(n, baselineNode, s)
	p.checkPassthrough(networkNode, s)
	p.checkFleet(n, s)
	p.checkOptional(s)
	grantRealTime(s)
}

// grantRealTime gives the groups of kinds that need it granted
// (guest.Traits.RealTimeOnRequest) the real-time priority a workload of
// the scenario needs (cyclictest's SCHED_FIFO threads), unless the group
// names its own: the measurement would otherwise fail in them alone.
func grantRealTime(s *Spec) {
	need := 0
	for _, e := range s.Workloads {
		w, err := workload.Lookup(e.Workload)
		if rt, ok := w.(workload.RealTimer); err == nil && ok {
			need = max(need, rt.RTPriority(e.Params))
		}
	}
	for i := range s.Guests {
		if g := &s.Guests[i]; guest.TraitsOf(g.Spec).RealTimeOnRequest && g.RTPriority == 0 {
			g.RTPriority = need
		}
	}
}

// PeerName names the run's network peer among its guests; no group may
// take it.
const PeerName = "peer"

// network reads the `network:` section.
func (p *parser) network(n *yaml.Node, s *Spec) *Network {
	nw := &Network{Path: string(netpath.Bridge), ClientCPU: NoPin, ServerCPU: NoPin}
	p.fields(n, "network", map[string]func(*yaml.Node, string){
		"path": func(v *yaml.Node, path string) {
			if name, ok := p.scalar(v, path); ok {
				if _, err := netpath.ParsePath(name); err != nil {
					p.errorf(v, path, "%v", err)
				}
				nw.Path = name
			}
		},
		"uplink": func(v *yaml.Node, path string) {
			if name, ok := p.scalar(v, path); ok {
				if err := netpath.CheckNICName(name); err != nil {
					p.errorf(v, path, "%v", err)
					return
				}
				nw.Uplink, p.uplinkAt = name, v
			}
		},
		"peer": func(v *yaml.Node, path string) {
			if url, ok := p.scalar(v, path); ok {
				t, err := remote.ParseURL(url)
				if err != nil {
					p.errorf(v, path, "%v", err)
					return
				}
				nw.Peer, p.peerAt = t.String(), v
			}
		},
		"peer_identity": func(v *yaml.Node, path string) {
			p.keyFile(v, path, s, &nw.PeerIdentity, "a private key file without passphrase, or remove peer_identity to use the SSH agent's keys", remote.CheckIdentity)
		},
		"peer_known_hosts": func(v *yaml.Node, path string) {
			p.keyFile(v, path, s, &nw.PeerKnownHosts, "a known_hosts file, or remove peer_known_hosts to use ~/.ssh/known_hosts", remote.CheckKnownHosts)
		},
		"peer_nic": func(v *yaml.Node, path string) {
			if name, ok := p.scalar(v, path); ok {
				if err := netpath.CheckNICName(name); err != nil {
					p.errorf(v, path, "%v", err)
					return
				}
				nw.PeerNIC = name
			}
		},
		"pin": func(v *yaml.Node, path string) {
			p.fields(v, path, map[string]func(*yaml.Node, string){
				"client": p.integer(&nw.ClientCPU, 0, maxCPU),
				"server": p.integer(&nw.ServerCPU, 0, maxCPU),
			})
		},
		"passthrough": func(v *yaml.Node, path string) {
			p.passthroughAt = v
			for i, item := range p.list(v, path, "PCI addresses (like 0000:03:00.1)") {
				at := fmt.Sprintf("%s[%d]", path, i)
				a, ok := p.scalar(item, at)
				switch {
				case !ok:
				case !netpath.IsPCIAddress(a):
					p.errorf(item, at, "%q is not allowed: want a PCI function's address as lspci -D prints it (domain:bus:device.function, like 0000:03:00.1)", a)
				case slices.Contains(nw.Passthrough, a):
					p.errorf(item, at, "%s is listed twice: each VM takes a device of its own", a)
				default:
					nw.Passthrough = append(nw.Passthrough, a)
				}
			}
		},
	})
	p.checkPeer(n, nw)
	return nw
}

// checkPassthrough matches network.passthrough (at n, the network
// section) with the VMs on the passthrough path, then asks the host
// whether it can lend the devices (Options.CheckPassthrough), each of its
// refusals an error of the field.
func (p *parser) checkPassthrough(n *yaml.Node, s *Spec) {
	const field = "network.passthrough"
	vms := 0
	for _, g := range s.Guests {
		if g.Network != "" && netpath.VMDeviceOf(netpath.Path(g.Network)) == netpath.VMVFIO {
			vms += g.Count
		}
	}
	at := p.passthroughAt
	switch {
	case vms == 0 && at != nil:
		p.errorf(at, field, "no guest group is on the %s path to take these devices: put VM groups on it (network: %s), or remove passthrough", netpath.Passthrough, netpath.Passthrough)
	case vms == 0:
	case at == nil:
		p.errorf(n, field, "missing: the %d VMs on the %s path each take a PCI device of the host, listed here (passthrough: [0000:03:00.1])", vms, netpath.Passthrough)
	case len(s.Network.Passthrough) < vms:
		p.errorf(at, field, "%d devices for the %d VMs on the %s path: each VM takes one", len(s.Network.Passthrough), vms, netpath.Passthrough)
	case p.opts.CheckPassthrough != nil:
		err := p.opts.CheckPassthrough(s.Network.Passthrough, vms)
		var joined interface{ Unwrap() []error }
		if errors.As(err, &joined) {
			for _, e := range joined.Unwrap() {
				p.errorf(at, field, "%v", e)
			}
		} else if err != nil {
			p.errorf(at, field, "%v", err)
		}
	}
}

// checkPeer refuses the fields of a remote peer without each other: a
// dedicated NIC leads to the peer's machine, which nothing local can play,
// and a remote peer is reached over that NIC only.
func (p *parser) checkPeer(n *yaml.Node, nw *Network) {
	switch {
	case nw.Uplink != "" && nw.Peer == "":
		p.errorf(p.uplinkAt, "network.uplink", "a dedicated NIC needs network.peer, the machine at its far end (ssh://USER@HOST[:PORT]), which runs the peer's side")
	case nw.Peer != "" && nw.Uplink == "":
		p.errorf(p.peerAt, "network.peer", "a remote peer needs network.uplink, the NIC of this host wired to it, which the run's path sits on")
	}
	if nw.Peer != "" && nw.PeerNIC == "" {
		p.errorf(p.peerAt, "network.peer_nic", "missing: name the peer's interface on the wire from network.uplink (as `ip link` shows it there)")
	}
	if nw.Peer == "" {
		for _, f := range []struct {
			key   string
			value string
		}{{"peer_identity", nw.PeerIdentity}, {"peer_known_hosts", nw.PeerKnownHosts}, {"peer_nic", nw.PeerNIC}} {
			if f.value != "" {
				p.errorf(n, "network."+f.key, "only for a remote peer: give network.peer too, or remove it")
			}
		}
	}
}

// checkUplink refuses, at network.uplink, a dedicated NIC under paths
// that cannot take one, and under paths in turn (see Expand) in a run
// that is one fleet (its sizes, placement and launch), whose aggressors would have
// to follow the NIC from path to path, or whose adaptive rounds would be
// asked for in one path by the groups of another.
func (p *parser) checkUplink(s *Spec) {
	if p.uplinkAt == nil {
		return
	}
	var paths []netpath.Path
	for _, g := range s.Guests {
		if g.Network != "" {
			paths = append(paths, netpath.Path(g.Network))
		}
	}
	if err := netpath.CheckUplinkPaths(paths); err != nil {
		p.errorf(p.uplinkAt, "network.uplink", "%v", err)
		return
	}
	inTurn := s.pathsInTurn()
	if len(inTurn) < 2 {
		return
	}
	why := ""
	switch {
	case s.Fleet != nil:
		why = "fleet places and launches its guests as one fleet"
	case s.Noise != nil:
		why = "noise runs aggressors"
	case s.Adaptive != nil:
		why = "adaptive weighs the precision of every group"
	default:
		return
	}
	p.errorf(p.uplinkAt, "network.uplink", "the NIC carries %s one at a time, and %s across them: keep one path on the NIC, or run each path on its own", strings.Join(inTurn, ", "), why)
}

// adaptive reads the `adaptive:` section. reps is the scenario's
// repetitions, the minimum an adaptive run does.
func (p *parser) adaptive(n *yaml.Node, reps int) *Adaptive {
	a := &Adaptive{MaxRepetitions: DefaultMaxRepetitions}
	var targetNode, maxNode *yaml.Node
	seen := p.fields(n, "adaptive", map[string]func(*yaml.Node, string){
		"target": func(v *yaml.Node, path string) {
			targetNode = v
			text, ok := p.scalar(v, path)
			if !ok {
				return
			}
			f, err := parsePercent(text)
			if err != nil || !(f > 0 && f < 1) {
				p.errorf(v, path, "%q is not allowed: want a relative half-width between 0%% and 100%%, like 5%% or 0.05", text)
				return
			}
			a.Target = f
		},
		"max_repetitions": func(v *yaml.Node, path string) { maxNode = v; p.integer(&a.MaxRepetitions, 1, 10000)(v, path) },
	})
	if seen == nil {
		return a
	}
	if targetNode == nil {
		p.errorf(n, "adaptive.target", "missing (required: the interval half-width to reach, like 5%%)")
	}
	if a.MaxRepetitions < reps {
		at := maxNode
		if at == nil {
			at = n
		}
		p.errorf(at, "adaptive.max_repetitions", "%d is below repetitions (%d), the minimum an adaptive run does", a.MaxRepetitions, reps)
	}
	return a
}

// parsePercent reads "5%" as 0.05 and a plain number as is.
func parsePercent(s string) (float64, error) {
	if pct, ok := strings.CutSuffix(strings.TrimSpace(s), "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(pct), 64)
		return f / 100, err
	}
	return strconv.ParseFloat(s, 64)
}

// guestNetwork reads a group's data path; it needs the network section.
func (p *parser) guestNetwork(v *yaml.Node, path string, s *Spec, g *GuestGroup) {
	name, ok := p.scalar(v, path)
	if !ok {
		return
	}
	if _, err := netpath.ParsePath(name); err != nil {
		p.errorf(v, path, "%v", err)
		return
	}
	if s.Network == nil {
		p.errorf(v, path, "a data path needs a network section at the top of the scenario (network: {path: %s})", name)
		return
	}
	g.Network = name
}

// image reads a group's image: a path, relative to the scenario file's
// directory, that exists, or a libvirt domain (libvirt:DOMAIN), which
// only the group's libvirt can look up. Whether the group's kind can run
// it is checked once the kind is known, whichever order the keys come in.
func (p *parser) image(n *yaml.Node, path string, s *Spec, g *GuestGroup) {
	if ref, ok := p.scalar(n, path); ok && strings.HasPrefix(ref, guest.LibvirtImagePrefix) {
		if name := strings.TrimPrefix(ref, guest.LibvirtImagePrefix); name == "" || strings.ContainsAny(name, "/\x00") {
			p.errorf(n, path, "%q is not allowed: give %sDOMAIN, the name of a domain defined at the group's libvirt", ref, guest.LibvirtImagePrefix)
			return
		}
		g.Image = ref
		return
	}
	p.file(n, path, s, &g.Image, "an OCI image layout or archive, or a VM disk, or libvirt:DOMAIN, or remove image to use vfleet's own", 0)
}

// file reads the path of something that must exist, relative to the
// scenario file's directory; want says what to give when it is empty. A
// max above 0 asks for a regular file of at most max bytes.
func (p *parser) file(n *yaml.Node, path string, s *Spec, dst *string, want string, max int64) {
	ref, ok := p.scalar(n, path)
	if !ok {
		return
	}
	if ref == "" {
		p.errorf(n, path, "empty: give the path of %s", want)
		return
	}
	if !filepath.IsAbs(ref) && !strings.HasPrefix(s.Source, "builtin:") {
		ref = filepath.Join(filepath.Dir(s.Source), ref)
	}
	abs, err := filepath.Abs(ref)
	if err == nil {
		_, err = os.Stat(abs)
	}
	if errors.Is(err, os.ErrNotExist) {
		p.errorf(n, path, "%s does not exist (a relative path is taken from the scenario file's directory)", abs)
		return
	}
	if err != nil {
		p.errorf(n, path, "%v", err)
		return
	}
	if max > 0 && !p.regularFile(n, path, abs, max) {
		return
	}
	*dst = abs
}

// keyFile is file for a key or known_hosts file, checked as every such
// file vfleet is given (package remote).
func (p *parser) keyFile(n *yaml.Node, path string, s *Spec, dst *string, want string, check func(string) error) {
	var abs string
	if p.file(n, path, s, &abs, want, 0); abs == "" {
		return
	}
	if err := check(abs); err != nil {
		p.errorf(n, path, "%v", err)
		return
	}
	*dst = abs
}

// regularFile says whether the file at abs is a regular file of at most
// max bytes, and if not, why, at n.
func (p *parser) regularFile(n *yaml.Node, path, abs string, max int64) bool {
	err := regfile.Check(abs, max)
	switch {
	case errors.Is(err, regfile.ErrNotRegular):
		p.errorf(n, path, "%v: give a regular file of at most %s", err, regfile.Bytes(max))
	case err != nil:
		p.errorf(n, path, "%v", err)
	}
	return err == nil
}

func (p *parser) list(n *yaml.Node, path, what string) []*yaml.Node {
	n = deref(n)
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		p.errorf(n, path, "want a non-empty list of %s", what)
		return nil
	}
	items := make([]*yaml.Node, len(n.Content))
	for i, item := range n.Content {
		items[i] = deref(item)
	}
	return items
}

func (p *parser) guests(n *yaml.Node, s *Spec) {
	names := map[string]int{}   // group name -> line
	made := map[string]string{} // guest name -> path of the group that makes it
	kindCount := map[string]int{}
	pathCount := map[string]int{} // data path -> guests on it
	for i, item := range p.list(n, "guests", "guest groups") {
		path := fmt.Sprintf("guests[%d]", i)
		g := GuestGroup{Count: 1}
		var memNode, cpusNode *yaml.Node
		var mem, cpus string
		// The kind says which fields the group takes beyond the common
		// ones, whichever line it is on.
		g.Kind = mappingValue(item, "kind")
		handlers := map[string]func(*yaml.Node, string){
			"name":     p.name(&g.Name),
			"kind":     p.str(&g.Kind),
			"runtime":  p.str(&g.Runtime),
			"cpus":     func(v *yaml.Node, path string) { cpusNode = v; p.str(&cpus)(v, path) },
			"memory":   func(v *yaml.Node, path string) { memNode = v; p.str(&mem)(v, path) },
			"count":    p.integer(&g.Count, 1, MaxCount),
			"network":  func(v *yaml.Node, path string) { p.guestNetwork(v, path, s, &g) },
			"image":    func(v *yaml.Node, path string) { p.image(v, path, s, &g) },
			"security": p.oneOf(&g.Security, guest.SecurityProfiles...),
			"cpu_limit": func(v *yaml.Node, path string) {
				s, ok := p.scalar(v, path)
				if !ok {
					return
				}
				f, err := strconv.ParseFloat(s, 64)
				if err != nil || !(f > 0 && f <= MaxCPULimit) { // NaN fails both
					p.errorf(v, path, "%q is not allowed: want a number of CPUs above 0 and at most %d, like 0.9 or 2", s, MaxCPULimit)
					return
				}
				g.CPULimit = f
			},
			"optional": p.boolean(&g.Optional),
		}
		for _, f := range guest.FieldsOf(g.Kind) {
			handlers[f.Key] = p.kindField(f, s, &g)
		}
		seen := p.fields(p.withoutMisplaced(item, path, g.Kind), path, handlers)
		if seen == nil {
			continue
		}
		switch {
		case seen["kind"] == nil:
			p.errorf(item, path+".kind", "missing (required; one of: %s)", strings.Join(p.opts.KnownKinds, ", "))
		case !contains(p.opts.KnownKinds, g.Kind):
			p.errorf(seen["kind"], path+".kind", "unknown kind %q (known: %s)", g.Kind, strings.Join(p.opts.KnownKinds, ", "))
		}
		if cpusNode != nil {
			p.cpuList(cpusNode, path+".cpus", cpus)
			g.CPUs = cpus
		}
		if memNode != nil {
			b, err := ParseSize(mem)
			if err != nil {
				p.errorf(memNode, path+".memory", "%q is not allowed: %v", mem, err)
			} else {
				p.memoryOnHost(memNode, path+".memory", mem, b)
			}
			g.MemoryBytes = b
		}
		if s.scaled(g) && seen["count"] != nil {
			p.errorf(seen["count"], path+".count", "fleet.scale sets this group's count; remove count here")
		}
		if s.scaled(g) {
			g.Count = s.Fleet.Scale[len(s.Fleet.Scale)-1]
		}
		if g.Name == "" {
			kindCount[g.Kind]++
			g.Name = g.Kind
			if kindCount[g.Kind] > 1 {
				g.Name = fmt.Sprintf("%s-%d", g.Kind, kindCount[g.Kind])
			}
		}
		// A VM's disk is a file: a device or a directory would only be
		// found out by QEMU, after the run has begun. A domain's disk is
		// the domain's libvirt's to find, before the run starts anything.
		domain, isDomain := g.LibvirtDomain()
		domainNowhere := isDomain && g.Libvirt == ""
		if domainNowhere {
			p.errorf(seen["image"], path+".image", "image %s%s needs libvirt: URI on the group (kind vm, libvirt: qemu:///system), where the domain is defined", guest.LibvirtImagePrefix, domain)
		}
		diskOK := g.Image == "" || isDomain || !guest.TraitsOf(g.Spec).BootsDisk || p.regularFile(seen["image"], path+".image", g.Image, guest.MaxDiskBytes)
		if g.Image != "" && !isDomain && diskOK && p.opts.CheckImage != nil && contains(p.opts.KnownKinds, g.Kind) {
			if err := p.opts.CheckImage(g.Spec); err != nil {
				p.errorf(seen["image"], path+".image", "%v", err)
			}
		}
		// The kind would refuse a domain without libvirt too, only at the
		// group's line rather than the image's.
		if p.opts.CheckGuest != nil && contains(p.opts.KnownKinds, g.Kind) && !domainNowhere {
			if err := p.opts.CheckGuest(g); err != nil {
				p.errorf(item, path, "%v", err)
			}
		}
		bare := guest.TraitsOf(g.Spec).Bare
		// A kind on a network of its own (a cluster's pods) reaches the
		// run's network workloads through a peer of its own there, on
		// no path of the run's.
		if g.Network == "" && s.Network != nil && !bare && guest.TraitsOf(g.Spec).Network != guest.NetOwn {
			g.Network = s.Network.Path
		}
		if seen["network"] != nil && bare {
			p.errorf(seen["network"], path+".network", "the %s baseline always reaches the peer over the host side's own direct link; remove network here", g.Kind)
		}
		if g.Network != "" {
			at := seen["network"]
			if at == nil {
				at = item
			}
			if err := pathTakes(g); err != nil {
				p.errorf(at, path+".network", "%v", err)
			}
		}
		if g.Network != "" {
			pathCount[g.Network] += g.Count
			if pathCount[g.Network] > netpath.MaxGuestsPerPath {
				p.errorf(item, path+".count", "network path %s holds at most %d guests in one run", g.Network, netpath.MaxGuestsPerPath)
			}
		}
		if g.Name == PeerName {
			p.errorf(item, path+".name", "%q is reserved for the run's network peer; choose another name", PeerName)
		}
		// Past MaxGuests the scenario is refused anyway (checkSize); naming
		// millions of guests first would take the time and memory that
		// limit is there to save.
		if line, dup := names[g.Name]; dup {
			p.errorf(item, path+".name", "guest group name %q is already used at line %d; give each group its own name", g.Name, line)
		} else if len(made)+g.Count <= MaxGuests {
			p.uniqueGuests(item, path, g, made)
		}
		names[g.Name] = item.Line
		p.noteOptional(g, seen["optional"])
		s.Guests = append(s.Guests, g)
	}
}

// uniqueGuests checks the names the group expands to against those of the
// groups before it: a group "c" of count 2 and a group named "c-0" would
// otherwise give two guests one name.
func (p *parser) uniqueGuests(item *yaml.Node, path string, g GuestGroup, made map[string]string) {
	for i := 0; i < g.Count; i++ {
		name := guestName(g, i)
		if other, dup := made[name]; dup {
			p.errorf(item, path+".name", "guest %q would be made by both %s and %s; rename one of the groups", name, other, path)
			return
		}
		made[name] = path
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (p *parser) workloads(n *yaml.Node, s *Spec) {
	// An entry without an id is named after its workload, so a workload
	// listed twice needs an id on every entry that lacks one; that is
	// checked after the walk, when every entry has been seen.
	type entry struct {
		item     *yaml.Node
		path     string
		implicit bool
	}
	var entries []entry
	for i, item := range p.list(n, "workloads", "workloads") {
		path := fmt.Sprintf("workloads[%d]", i)
		e := WorkloadEntry{}
		var paramsNode *yaml.Node
		seen := p.fields(item, path, map[string]func(*yaml.Node, string){
			"workload": p.str(&e.Workload),
			"id":       p.name(&e.ID),
			"params":   func(v *yaml.Node, _ string) { paramsNode = v },
			"duration": p.duration(&e.Duration),
		})
		if seen == nil {
			continue
		}
		if seen["workload"] == nil {
			p.errorf(item, path+".workload", "missing (required; one of: %s)", strings.Join(workload.Names(), ", "))
			continue
		}
		w, err := workload.Lookup(e.Workload)
		if err != nil {
			msg := fmt.Sprintf("unknown workload %q (known: %s)", workload.Clip(e.Workload), strings.Join(workload.Names(), ", "))
			if sg := suggest(e.Workload, workload.Names()); sg != "" {
				msg += fmt.Sprintf("; did you mean %q?", sg)
			}
			p.errorf(seen["workload"], path+".workload", "%s", msg)
			continue
		}
		e.Params = p.params(paramsNode, path+".params", w)
		if _, net := w.(workload.Networked); net && s.Network == nil {
			p.errorf(seen["workload"], path+".workload", "%s measures the network: add a network section (network: {path: bridge}) so the run has a peer to measure against", e.Workload)
		} else if net {
			p.inbound(seen["workload"], path, s, e)
		}
		implicit := seen["id"] == nil
		if implicit {
			e.ID = e.Workload
		}
		d := e.Duration
		if d == 0 {
			d = s.Duration
		}
		if md, ok := w.(workload.MinDurationer); ok && d < md.MinDuration() {
			p.errorf(item, path+".duration", "%s needs at least %s to measure (the duration in effect is %s)", e.Workload, md.MinDuration(), d)
		}
		s.Workloads = append(s.Workloads, e)
		entries = append(entries, entry{item, path, implicit})
	}
	lines := map[string][]int{} // workload -> lines of its entries
	for i, e := range s.Workloads {
		lines[e.Workload] = append(lines[e.Workload], entries[i].item.Line)
	}
	ids := map[string]int{} // id -> line
	for i, e := range s.Workloads {
		en := entries[i]
		if l := lines[e.Workload]; en.implicit && len(l) > 1 {
			p.errorf(en.item, en.path+".id", "missing: workload %q appears %d times (lines %s), so each entry needs a distinct id", e.Workload, len(l), joinInts(l))
			continue
		}
		if e.ID == "" { // an id that failed its own check
			continue
		}
		if line, dup := ids[e.ID]; dup {
			p.errorf(en.item, en.path+".id", "id %q is already used at line %d", e.ID, line)
			continue
		}
		ids[e.ID] = en.item.Line
	}
}

// inbound refuses a network workload whose client runs on the peer for
// the groups on a path the peer cannot connect into (a VM behind passt's
// NAT): its servers in the guest would never be reached.
func (p *parser) inbound(at *yaml.Node, path string, s *Spec, e WorkloadEntry) {
	if workload.ClientOf(e.Params) != workload.ClientPeer {
		return
	}
	for _, g := range s.Guests {
		if g.Network == "" {
			continue
		}
		if err := netpath.CheckInbound(netpath.Path(g.Network)); err != nil {
			p.errorf(at, path+".params.client", "client: peer cannot reach group %s: %v", g.Name, err)
		}
	}
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

// params merges the entry's parameters over the workload's defaults and
// validates the result.
func (p *parser) params(n *yaml.Node, path string, w workload.Workload) workload.Params {
	merged := w.Defaults()
	if n == nil {
		return merged
	}
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		p.errorf(n, path, "want a mapping of parameter names to values")
		return merged
	}
	known := sortedKeys(merged)
	structured := map[string]bool{}
	if sw, ok := w.(workload.Structured); ok {
		for _, k := range sw.StructuredParams() {
			structured[k] = true
		}
	}
	given := map[string]int{} // key -> line
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if line, dup := given[k.Value]; dup {
			p.errorf(k, joinPath(path, k.Value), "given twice (first at line %d)", line)
			continue
		}
		given[k.Value] = k.Line
		if _, ok := merged[k.Value]; !ok {
			msg := fmt.Sprintf("%s has no parameter %q (allowed: %s)", w.Name(), workload.Clip(k.Value), strings.Join(known, ", "))
			if s := suggest(k.Value, known); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			}
			p.errorf(k, joinPath(path, k.Value), "%s", msg)
			continue
		}
		if structured[k.Value] {
			merged[k.Value] = p.jsonValue(v, joinPath(path, k.Value))
		} else if val, ok := p.scalar(v, joinPath(path, k.Value)); ok {
			merged[k.Value] = val
		}
	}
	var pe *workload.ParamError
	switch err := w.Validate(merged); {
	case errors.As(err, &pe):
		p.errorf(paramNode(n, pe), joinPath(path, pe.Field()), "%s", pe.Msg)
	case err != nil:
		p.errorf(n, path, "%s", strings.TrimPrefix(err.Error(), workload.ErrBadParam.Error()+": "))
	}
	return merged
}

// jsonValue is a structured parameter's value as compact JSON. Every
// scalar in it is a string, as YAML wrote it: an argv [taskset, -c, 1]
// means the text "1", not a number.
func (p *parser) jsonValue(n *yaml.Node, path string) string {
	b, err := json.Marshal(plainValue(n))
	if err != nil {
		p.errorf(n, path, "cannot be a parameter: %v", err)
		return ""
	}
	return string(b)
}

func plainValue(n *yaml.Node) any {
	n = deref(n)
	switch n.Kind {
	case yaml.SequenceNode:
		list := make([]any, len(n.Content))
		for i, item := range n.Content {
			list[i] = plainValue(item)
		}
		return list
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			m[n.Content[i].Value] = plainValue(n.Content[i+1])
		}
		return m
	}
	return n.Value
}

// paramNode finds the node a parameter error points into, as deep as the
// scenario has it; the params mapping itself when the key is not given.
func paramNode(params *yaml.Node, pe *workload.ParamError) *yaml.Node {
	at := params
	for i := 0; i+1 < len(params.Content); i += 2 {
		if params.Content[i].Value == pe.Key {
			at = deref(params.Content[i+1])
		}
	}
	if at == params {
		return at
	}
	for _, step := range pe.Path {
		next := (*yaml.Node)(nil)
		switch s := step.(type) {
		case int:
			if at.Kind == yaml.SequenceNode && s < len(at.Content) {
				next = at.Content[s]
			}
		case string:
			for i := 0; at.Kind == yaml.MappingNode && i+1 < len(at.Content); i += 2 {
				if at.Content[i].Value == s {
					next = at.Content[i+1]
				}
			}
		}
		if next == nil {
			break
		}
		at = deref(next)
	}
	return at
}

func (p *parser) baseline(root, n *yaml.Node, s *Spec) {
	if s.Baseline == "" {
		for _, g := range s.Guests {
			if guest.TraitsOf(g.Spec).Bare {
				s.Baseline = g.Name
				break
			}
		}
		if s.Baseline == "" && len(s.Guests) > 0 {
			p.errorf(root, "baseline", "missing: no guest group of kind %q to compare against; add one or name a group in baseline", BaselineKind)
		}
		return
	}
	var names []string
	for _, g := range s.Guests {
		names = append(names, g.Name)
		if g.Name == s.Baseline {
			return
		}
	}
	p.errorf(n, "baseline", "%q is not a guest group (groups: %s)", s.Baseline, strings.Join(names, ", "))
}

// maxCPU is the highest cpu number Linux can have (NR_CPUS is at most 8192).
const maxCPU = 8191

var cpuRangeRE = regexp.MustCompile(`^(\d+)(?:-(\d+))?$`)

// checkCPUSet validates the kernel's cpuset list syntax ("0", "0-3", "0,2-3").
func (p *parser) hostSettings(n *yaml.Node) *HostSettings {
	hs := &HostSettings{}
	seen := p.fields(n, "host_settings", map[string]func(*yaml.Node, string){
		"rt_runtime_us": func(v *yaml.Node, path string) {
			var us int
			p.integer(&us, -1, MaxRTRuntimeUS)(v, path)
			hs.RTRuntimeUS = &us
		},
		"irq_affinity": p.cpuSet(&hs.IRQAffinity),
	})
	if seen != nil && len(seen) == 0 {
		p.errorf(n, "host_settings", "empty: give rt_runtime_us, irq_affinity or both, or remove it")
	}
	return hs
}

func checkCPUSet(s string) error {
	if s == "" {
		return errors.New("empty cpu list")
	}
	for _, part := range strings.Split(s, ",") {
		m := cpuRangeRE.FindStringSubmatch(part)
		if m == nil {
			return errors.New(`want a cpu list like "0", "0-3" or "0,2-3"`)
		}
		lo, err := strconv.Atoi(m[1])
		hi := lo
		if err == nil && m[2] != "" {
			hi, err = strconv.Atoi(m[2])
		}
		if err != nil || hi > maxCPU {
			return fmt.Errorf("cpu numbers go up to %d", maxCPU)
		}
		if hi < lo {
			return fmt.Errorf("range %s runs backwards", part)
		}
	}
	return nil
}

var sizeRE = regexp.MustCompile(`^([0-9]+)\s*([KMGT]i?B?|B)?$`)

// ParseSize reads a memory size: a number of bytes or one with a unit
// (K, M, G, T; KiB, MiB, GiB, TiB, or KB.. — all binary, as the kernel's
// limits are).
func ParseSize(s string) (int64, error) {
	m := sizeRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, errors.New("want a size like 512MiB, 1GiB or 256M")
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || n <= 0 {
		return 0, errors.New("want a positive size")
	}
	if m[2] == "" || m[2] == "B" {
		return n, nil
	}
	shift := map[byte]uint{'K': 10, 'M': 20, 'G': 30, 'T': 40}[m[2][0]]
	if n > math.MaxInt64>>shift {
		return 0, errors.New("too large")
	}
	return n << shift, nil
}

// Hash identifies the scenario text; stored with every run.
func (s *Spec) Hash() string {
	sum := sha256.Sum256(s.Text)
	return hex.EncodeToString(sum[:])
}

// pathTakes says whether the group's network takes its guests: a
// namespace guest, a VM on a device in the host side, or a VM whose
// emulator opens its tap in this host's own namespace, each of its specs
// (a group spread over hosts has several).
func pathTakes(g GuestGroup) error {
	path := netpath.Path(g.Network)
	switch guest.TraitsOf(g.Spec).Network {
	case guest.NetOwn:
		return fmt.Errorf("kind %s is on the network of the system its guests run in (a cluster's pod network), which no path of a run reaches; remove network here (the run reaches its guests through a peer on their own network)", g.Kind)
	case guest.NetNamespace:
		return netpath.CheckNamespacePath(path)
	}
	for _, s := range g.Variants() {
		root, err := guest.TapsInRoot(s)
		switch {
		case err != nil:
			return err
		case root:
			err = netpath.CheckRootTapPath(path)
		default:
			err = netpath.CheckVMPath(path)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
