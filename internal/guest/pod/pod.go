// Package pod implements the pod guest kind: each guest a pod of a
// Kubernetes cluster running vfleet's agent from vfleet's image, reached
// through the cluster's API server (an exec of the agent's standard-I/O
// session), never through a port opened on a node. A group names the
// cluster (kubeconfig, kube_context), the image the cluster pulls
// (pod_image), and where its pods go (node, a list the group's guests
// spread over round robin; or the scheduler's choice); its runtime is the
// pods' RuntimeClass, the cluster's name for an isolation technology.
//
// A run's pods live in a namespace of the run's own, made by its first
// guest and deleted after its last; every guest records it in the ledger
// too, so that a clean after a crash deletes it whichever guest's record
// it reads first.
package pod

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vfleet/vfleet/internal/agent"
	"github.com/vfleet/vfleet/internal/guest"
	"github.com/vfleet/vfleet/internal/kube"
)

// KindName is the name scenarios use for pods.
const KindName = "pod"

// The group's fields.
const (
	fieldKubeconfig  = "kubeconfig"
	fieldContext     = "kube_context"
	fieldImage       = "pod_image"
	fieldPull        = "image_pull"
	fieldNode        = "node"
	fieldSelector    = "node_selector"
	fieldHostNetwork = "host_network"
	fieldBare        = "bare"
)

// EnvImage is the environment variable a group without pod_image takes
// its image's reference from, so that the built-in scenarios, which
// cannot know a user's registry, run on any cluster: what `vfleet image
// push` prints to set.
const EnvImage = "VFLEET_POD_IMAGE"

// Pull policies, as a scenario writes them.
const (
	PullIfNotPresent = "if-not-present"
	PullAlways       = "always"
	PullNever        = "never"
)

// readyTimeout bounds a pod's way to ready: scheduled, its image pulled
// (vfleet's is about 160 MiB), its container started.
const readyTimeout = 5 * time.Minute

func init() { guest.Register(kind{}) }

type kind struct{}

func (kind) Name() string { return KindName }

// Traits: a pod's agent is its node's process, not one of this host's
// that vfleet started; its network is the cluster's.
func (kind) Traits() guest.Traits {
	return guest.Traits{Network: guest.NetOwn, AgentInGuest: true, Elsewhere: true, Security: []string{guest.SecurityDefault}}
}

func (kind) Fields() []guest.Field {
	return []guest.Field{
		guest.OwnTextField(fieldKubeconfig),
		guest.OwnTextField(fieldContext),
		guest.OwnTextField(fieldImage),
		guest.OwnTextField(fieldPull, PullIfNotPresent, PullAlways, PullNever),
		guest.Spreading(guest.OwnTextField(fieldNode)),
		guest.OwnTextField(fieldSelector),
		guest.OwnBoolField(fieldHostNetwork),
		guest.OwnBoolField(fieldBare),
	}
}

// Probe: nothing of this host is needed; the cluster a group names is
// asked by ProbeSpec.
func (kind) Probe(context.Context, string) error { return nil }

// ProbeSpec asks the group's cluster whether it runs the group's pods:
// its API server answers, it has the RuntimeClass and the node named.
func (kind) ProbeSpec(ctx context.Context, spec guest.Spec, _ guest.Env) error {
	c, err := kube.Connect(targetOf(spec))
	if err != nil {
		return fmt.Errorf("%w: %v", guest.ErrNotSupported, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// Listing the RuntimeClasses also shows that the API server answers.
	have, err := c.RuntimeClasses(ctx)
	if err != nil {
		return fmt.Errorf("%w: %v", guest.ErrNotSupported, err)
	}
	if rc := spec.Runtime; rc != "" && !slices.Contains(have, rc) {
		return fmt.Errorf("%w: kubernetes %s has no RuntimeClass %q (it has %v)", guest.ErrNotSupported, c.Server, rc, have)
	}
	if n := spec.Own.Text(fieldNode); n != "" {
		if _, err := c.Node(ctx, n); err != nil {
			return fmt.Errorf("%w: %v", guest.ErrNotSupported, err)
		}
	}
	if sel := spec.Own.Text(fieldSelector); sel != "" {
		nodes, err := c.Nodes(ctx, sel)
		if err != nil {
			return fmt.Errorf("%w: %v", guest.ErrNotSupported, err)
		}
		if len(nodes) == 0 {
			return fmt.Errorf("%w: kubernetes %s has no node with the labels %s (%s)", guest.ErrNotSupported, c.Server, sel, fieldSelector)
		}
	}
	return nil
}

// NetPeer: a run's network workloads reach a cluster's pods through a
// pod of the run's on the same pod network, vfleet's agent running the
// servers (and the clients, for client: peer) there, under the cluster's
// default runtime; on the node of the first guest that asks, so that a
// one-node round trip stays on its node.
func (kind) NetPeer(spec guest.Spec) (string, guest.Spec) {
	t := targetOf(spec)
	own := guest.Own{}
	for _, f := range []string{fieldKubeconfig, fieldContext, fieldImage, fieldPull, fieldNode} {
		if v := spec.Own.Text(f); v != "" {
			own = own.With(f, v)
		}
	}
	return t.Kubeconfig + "\x00" + t.Context, guest.Spec{Kind: KindName, Own: own}
}

func targetOf(spec guest.Spec) kube.Target {
	return kube.Target{Kubeconfig: spec.Own.Text(fieldKubeconfig), Context: spec.Own.Text(fieldContext)}
}

func (kind) New(spec guest.Spec, env guest.Env) (guest.Guest, error) {
	if err := check(spec); err != nil {
		return nil, fmt.Errorf("guest %s: %v", spec.Name, err)
	}
	if env.Detached {
		return nil, fmt.Errorf("guest %s: %w: a pod's agent is reached through an exec that lasts as long as the process that opened it, and long-lived fleets of pods are not built yet", spec.Name, guest.ErrNotDetachable)
	}
	return &Guest{Base: guest.NewBase(spec), env: env}, nil
}

func check(spec guest.Spec) error {
	switch {
	case spec.CPUs != "":
		return errors.New("cpus pins to this host's CPUs, which a pod cannot ask for; cpu_limit caps its CPU time")
	case spec.Image != "":
		return fmt.Errorf("image is this host's file, which a cluster cannot pull: give the image's reference in a registry the cluster pulls from as %s", fieldImage)
	case spec.RTPriority != 0:
		return errors.New("rt_priority is not allowed: a pod cannot ask for real-time scheduling")
	case imageOf(spec) == "":
		return fmt.Errorf("%s is missing, and %s is not set: the reference the cluster pulls vfleet's image by (see docs/kubernetes.md for putting it into a registry)", fieldImage, EnvImage)
	case spec.Own.Text(fieldNode) != "" && spec.Own.Text(fieldSelector) != "":
		return fmt.Errorf("%s and %s: give one (a node by name takes no scheduler, a selector asks it)", fieldNode, fieldSelector)
	}
	if sel := spec.Own.Text(fieldSelector); sel != "" {
		if _, err := kube.ParseSelector(sel); err != nil {
			return fmt.Errorf("%s: %v", fieldSelector, err)
		}
	}
	if spec.Own.Bool(fieldBare) {
		if err := checkBare(spec); err != nil {
			return err
		}
	}
	if err := kube.CheckName("guest", spec.Name); err != nil {
		return err
	}
	if err := guest.CheckSpec(KindName, spec); err != nil {
		return err
	}
	_, err := guest.SecurityOf(spec)
	return err
}

// checkBare refuses what would make a node's bare baseline less than the
// node itself: another runtime, limits, a confinement of its own.
func checkBare(spec guest.Spec) error {
	switch {
	case spec.Runtime != "":
		return fmt.Errorf("%s: a RuntimeClass (runtime %q) is an isolation to measure against the node, not the node itself; leave runtime out", fieldBare, spec.Runtime)
	case spec.MemoryBytes != 0 || spec.CPULimit != 0:
		return fmt.Errorf("%s: memory and cpu_limit confine the baseline, which has the whole node; leave them out", fieldBare)
	case spec.Security != "":
		return fmt.Errorf("%s: the pod is privileged, on its node's network and PIDs; leave security out", fieldBare)
	}
	return nil
}

// imageOf is the reference the group's pods run: its own, else the
// environment's.
func imageOf(spec guest.Spec) string {
	return cmp.Or(spec.Own.Text(fieldImage), os.Getenv(EnvImage))
}

// Guest is one pod.
type Guest struct {
	*guest.Base
	env guest.Env
}

func (g *Guest) Start(ctx context.Context) error { return g.Launch(ctx, g.start) }

func (g *Guest) start(ctx context.Context, undo *guest.Teardown) (*agent.Client, guest.Info, error) {
	spec := g.Spec()
	c, err := clusters.of(targetOf(spec))
	if err != nil {
		return nil, guest.Info{}, err
	}
	ns := kube.NamespaceOf(g.env.RunID)
	labels := map[string]string{kube.LabelManagedBy: kube.ManagedBy, kube.LabelRun: g.env.RunID}
	if err := g.useNamespace(ctx, c, ns, labels, undo); err != nil {
		return nil, guest.Info{}, err
	}

	p := kube.AgentPod{
		Namespace: ns, Name: spec.Name, Labels: map[string]string{kube.LabelGuest: spec.Name},
		Image: imageOf(spec), Pull: pullPolicy(spec.Own.Text(fieldPull)),
		AgentPath: g.env.AgentPath, SocketDir: guest.AgentSocketDir, ScratchDir: guest.ScratchDir,
		RuntimeClass: spec.Runtime, Node: spec.Own.Text(fieldNode), HostNetwork: spec.Own.Bool(fieldHostNetwork),
		Bare:        spec.Own.Bool(fieldBare),
		MemoryBytes: spec.MemoryBytes, MilliCPU: kube.MilliCPU(spec.CPULimit),
	}
	if sel := spec.Own.Text(fieldSelector); sel != "" {
		// check parsed it already.
		p.NodeSelector, _ = kube.ParseSelector(sel)
	}
	for k, v := range labels {
		p.Labels[k] = v
	}
	e, err := c.RecordPod(g.env.Ledger, ns, p.Name)
	if err != nil {
		return nil, guest.Info{}, err
	}
	undo.PushRelease(g.env.Ledger, e)
	asked, seen := time.Now(), map[string]time.Time{}
	if err := c.CreatePod(ctx, p.Pod()); err != nil {
		return nil, guest.Info{}, err
	}
	readyCtx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	pod, err := c.WaitReady(readyCtx, ns, p.Name, seen)
	if err != nil {
		return nil, guest.Info{}, err
	}
	conn, err := c.Exec(ctx, ns, p.Name, kube.AgentContainer, p.AgentStdio())
	if err != nil {
		return nil, guest.Info{}, err
	}
	client, err := agent.NewClient(ctx, conn)
	if err != nil {
		conn.Close()
		// What the exec said (a missing agent, a refused exec) is why.
		return nil, guest.Info{}, errors.Join(fmt.Errorf("vfleet's agent in pod %s/%s: %w", ns, p.Name, err), conn.Err())
	}
	details, err := g.details(ctx, c, pod)
	if err != nil {
		client.Close()
		return nil, guest.Info{}, err
	}
	// A pod the API server reports no address of has none a peer can
	// reach: the run says so if it needs one.
	addr, _ := netip.ParseAddr(pod.Status.PodIP)
	return client, guest.Info{Kind: KindName, Runtime: spec.Runtime, ScratchDir: guest.ScratchDir, Details: details, Phases: phasesOf(asked, seen), Addr: addr}, nil
}

// phasesOf are the phases of a pod's start seen passed, in the order
// Kubernetes passes them, from the moment the pod was asked for.
func phasesOf(asked time.Time, seen map[string]time.Time) []guest.Phase {
	var out []guest.Phase
	for _, ph := range kube.Phases {
		if at, ok := seen[string(ph)]; ok {
			out = append(out, guest.Phase{Name: string(ph), After: at.Sub(asked)})
		}
	}
	return out
}

// imageID is the image the node ran, by digest, as it says.
func imageID(pod *corev1.Pod) string {
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == kube.AgentContainer {
			return s.ImageID
		}
	}
	return ""
}

func pullPolicy(p string) corev1.PullPolicy {
	switch p {
	case PullAlways:
		return corev1.PullAlways
	case PullNever:
		return corev1.PullNever
	}
	return corev1.PullIfNotPresent
}

// details are what a run records of the pod: where it ran, under what,
// and how long each phase of its start took.
func (g *Guest) details(ctx context.Context, c *kube.Cluster, pod *corev1.Pod) (map[string]string, error) {
	d := map[string]string{
		"security":          guest.SecurityDefault,
		"seccomp":           "RuntimeDefault (the node's container runtime's profile)",
		"no_new_privileges": "true",
		"cluster":           c.Server,
		"namespace":         pod.Namespace,
		"pod":               pod.Name,
		"node":              pod.Spec.NodeName,
		"pod_ip":            pod.Status.PodIP,
		"image":             pod.Spec.Containers[0].Image,
		"image_id":          imageID(pod),
		"runtime_class":     "the cluster's default",
		"network":           "the cluster's pod network (CNI)",
	}
	if c.Context != "" {
		d["kube_context"] = c.Context
	}
	if pod.Spec.RuntimeClassName != nil {
		d["runtime_class"] = *pod.Spec.RuntimeClassName
	}
	if pod.Spec.HostNetwork {
		d["network"] = "the node's own (host_network)"
	}
	if g.Spec().Own.Bool(fieldBare) {
		d["security"] = "privileged"
		d["seccomp"] = "unconfined"
		d["no_new_privileges"] = "false"
		d["bare"] = "the node's baseline: privileged, on the node's network and PID namespace, without limits"
	}
	for ph, lat := range kube.StartLatency(pod) {
		d["start_"+ph+"_s"] = strconv.FormatFloat(lat.Seconds(), 'f', -1, 64)
	}
	node, err := c.Node(ctx, pod.Spec.NodeName)
	if err != nil {
		return nil, err
	}
	info := node.Status.NodeInfo
	d[guest.KernelDetail] = info.KernelVersion
	d["container_runtime"] = info.ContainerRuntimeVersion
	d["kubelet"] = info.KubeletVersion
	return d, nil
}

// useNamespace makes the run's namespace unless another guest of the run
// in this process has, and pushes its release: the last guest of the run
// to stop deletes it. Each guest records it in its own ledger scope, so a
// clean of any one guest takes it away.
func (g *Guest) useNamespace(ctx context.Context, c *kube.Cluster, ns string, labels map[string]string, undo *guest.Teardown) error {
	e, err := c.RecordNamespace(g.env.Ledger, ns)
	if err != nil {
		return err
	}
	key := c.Server + "\x00" + c.Context + "\x00" + ns
	u := namespaces.use(key)
	undo.Push(func() error {
		if !namespaces.leave(key, u) {
			return g.env.Ledger.Done(e)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		return g.env.Ledger.Release(ctx, e)
	})
	u.once.Do(func() { u.err = c.CreateNamespace(ctx, ns, labels) })
	return u.err
}

// clusters are the clusters this process's pods run on, one client each:
// a fleet's guests share its connections to the API server rather than
// each reading the kubeconfig and opening its own.
var clusters = clusterCache{byTarget: map[kube.Target]*kube.Cluster{}}

type clusterCache struct {
	mu       sync.Mutex
	byTarget map[kube.Target]*kube.Cluster
}

func (cc *clusterCache) of(t kube.Target) (*kube.Cluster, error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if c, ok := cc.byTarget[t]; ok {
		return c, nil
	}
	c, err := kube.Connect(t)
	if err != nil {
		return nil, err
	}
	cc.byTarget[t] = c
	return c, nil
}

// namespaces counts the guests of this process in each run namespace.
var namespaces = namespaceUsers{users: map[string]*namespaceUse{}}

type namespaceUsers struct {
	mu    sync.Mutex
	users map[string]*namespaceUse
}

// namespaceUse is one namespace's guests: the first makes it (once), the
// last deletes it.
type namespaceUse struct {
	count int
	once  sync.Once
	err   error
}

func (n *namespaceUsers) use(key string) *namespaceUse {
	n.mu.Lock()
	defer n.mu.Unlock()
	u := n.users[key]
	if u == nil {
		u = &namespaceUse{}
		n.users[key] = u
	}
	u.count++
	return u
}

// leave says whether u's last guest left.
func (n *namespaceUsers) leave(key string, u *namespaceUse) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	u.count--
	if u.count > 0 {
		return false
	}
	delete(n.users, key)
	return true
}
