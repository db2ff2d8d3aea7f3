// Package kube is vfleet's way into a Kubernetes cluster, through its API
// server only (client-go): a run's namespace and its pods, each recorded
// in the ledger before it is asked for and deleted, waiting until the
// cluster says it is gone, by the run's end, Ctrl-C or `vfleet clean`; a
// pod's start-up per phase; and a stream into a pod's container through
// the API server's exec, over which the host talks to vfleet's agent
// there, so that no port is opened on a node.
//
// The ledger holds where the cluster is (the kubeconfig files and the
// context), never a credential: a clean after a crash reads the same
// kubeconfig again.
package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/vfleet/vfleet/internal/ledger"
)

// Labels vfleet puts on everything it makes in a cluster: whose it is,
// which run's, which guest's.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "vfleet"
	LabelRun       = "vfleet.dev/run"
	LabelGuest     = "vfleet.dev/guest"
)

// Target is where a cluster is, as the ledger records it: the kubeconfig
// files (their paths, joined as KUBECONFIG joins them; empty for
// KUBECONFIG or ~/.kube/config) and the context (empty for the files'
// current one).
type Target struct {
	Kubeconfig string
	Context    string
}

func (t Target) String() string {
	s := cmp.Or(t.Kubeconfig, "the default kubeconfig")
	if t.Context != "" {
		s += ", context " + t.Context
	}
	return s
}

// Cluster is one cluster's API server, reached as Target says.
type Cluster struct {
	Target
	// Server is the API server's URL, as the kubeconfig names it.
	Server string
	config *rest.Config
	// core and node are the REST clients of the core and node.k8s.io
	// groups' version 1, the only API groups vfleet uses.
	core, node *rest.RESTClient
}

// Connect reads t's kubeconfig; it does not call the API server yet.
func Connect(t Target) (*Cluster, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if t.Kubeconfig != "" {
		rules.Precedence = filepath.SplitList(t.Kubeconfig)
		rules.ExplicitPath = ""
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: t.Context})
	config, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes (%s): %w", t, err)
	}
	config.UserAgent = "vfleet"
	// A fleet's start asks for many pods at once: client-go's default of
	// 5 requests a second would pace the fleet, not the cluster.
	config.QPS, config.Burst = 100, 200
	core, err := restClient(config, "/api", corev1.SchemeGroupVersion)
	if err != nil {
		return nil, fmt.Errorf("kubernetes (%s): %w", t, err)
	}
	node, err := restClient(config, "/apis", nodev1.SchemeGroupVersion)
	if err != nil {
		return nil, fmt.Errorf("kubernetes (%s): %w", t, err)
	}
	if t.Kubeconfig == "" {
		// The ledger must name the files read now, not whatever a later
		// clean's environment points at.
		t.Kubeconfig = strings.Join(rules.GetLoadingPrecedence(), string(filepath.ListSeparator))
	}
	return &Cluster{Target: t, Server: config.Host, config: config, core: core, node: node}, nil
}

// CheckName refuses what Kubernetes would not take as a namespace's or a
// pod's name (a DNS-1123 label), saying why.
func CheckName(what, name string) error {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return fmt.Errorf("%s %q cannot name a Kubernetes object: %s", what, name, strings.Join(errs, "; "))
	}
	return nil
}

// NamespaceOf is the namespace of a run: its key, made a DNS-1123 label.
func NamespaceOf(runID string) string {
	b := []byte("vfleet-" + strings.ToLower(runID))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			b[i] = '-'
		}
	}
	return strings.TrimRight(string(b[:min(len(b), validation.DNS1123LabelMaxLength)]), "-")
}

// Ledger entry kinds: the namespace (ID its name) and a pod (ID
// NAMESPACE/NAME), each with the cluster's Target in its data.
const (
	KindNamespace = "kube-namespace"
	KindPod       = "kube-pod"
)

func init() {
	// client-go also logs what it returns (a stream cut short, a watch
	// ended) through klog, onto vfleet's standard error: its errors reach
	// vfleet's users as vfleet's own, once.
	klog.SetLogger(logr.Discard())
	ledger.RegisterUndo(KindNamespace, func(ctx context.Context, e ledger.Entry) error {
		c, err := Connect(targetOf(e))
		if err != nil {
			return err
		}
		return c.DeleteNamespace(ctx, e.ID)
	})
	ledger.RegisterUndo(KindPod, func(ctx context.Context, e ledger.Entry) error {
		ns, name, ok := strings.Cut(e.ID, "/")
		if !ok {
			return fmt.Errorf("ledger pod entry %q is not NAMESPACE/NAME", e.ID)
		}
		c, err := Connect(targetOf(e))
		if err != nil {
			return err
		}
		return c.DeletePod(ctx, ns, name)
	})
}

func (c *Cluster) ledgerData() map[string]string {
	return map[string]string{"kubeconfig": c.Kubeconfig, "context": c.Context, "server": c.Server}
}

func targetOf(e ledger.Entry) Target {
	return Target{Kubeconfig: e.Data["kubeconfig"], Context: e.Data["context"]}
}

// RecordNamespace records the namespace in l before it is asked for.
func (c *Cluster) RecordNamespace(l *ledger.Ledger, name string) (ledger.Entry, error) {
	return l.Record(KindNamespace, name, c.ledgerData())
}

// RecordPod records a pod in l before it is asked for.
func (c *Cluster) RecordPod(l *ledger.Ledger, namespace, name string) (ledger.Entry, error) {
	return l.Record(KindPod, namespace+"/"+name, c.ledgerData())
}

// CreateNamespace makes the namespace with vfleet's labels; one that is
// there already is taken only if it is the same run's.
func (c *Cluster) CreateNamespace(ctx context.Context, name string, labels map[string]string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	err := c.core.Post().Resource("namespaces").Body(ns).Do(ctx).Error()
	if !apierrors.IsAlreadyExists(err) {
		return c.wrap("create namespace "+name, err)
	}
	got := &corev1.Namespace{}
	if err := c.get(ctx, object{resource: "namespaces", name: name}, got); err != nil {
		return c.wrap("look at namespace "+name, err)
	}
	if got.Labels[LabelRun] != labels[LabelRun] || got.Labels[LabelManagedBy] != ManagedBy {
		return fmt.Errorf("kubernetes %s: namespace %s exists and is not this run's (labels %v): vfleet runs only in a namespace of its own", c.Server, name, got.Labels)
	}
	if got.Status.Phase == corev1.NamespaceTerminating {
		return fmt.Errorf("kubernetes %s: namespace %s is still being deleted", c.Server, name)
	}
	return nil
}

// DeleteNamespace deletes the namespace, and with it what is left in it,
// and waits until the cluster says it is gone.
func (c *Cluster) DeleteNamespace(ctx context.Context, name string) error {
	return c.delete(ctx, object{resource: "namespaces", name: name}, &metav1.DeleteOptions{})
}

// CreatePod asks for the pod.
func (c *Cluster) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	err := c.core.Post().Namespace(pod.Namespace).Resource("pods").Body(pod).Do(ctx).Error()
	return c.wrap("create pod "+pod.Namespace+"/"+pod.Name, err)
}

// podGrace is the time a deleted pod's container is given to stop before
// it is killed: vfleet's agent stops at once on SIGTERM.
const podGrace = 1

// DeletePod deletes the pod and waits until the cluster says it is gone.
func (c *Cluster) DeletePod(ctx context.Context, namespace, name string) error {
	grace := int64(podGrace)
	return c.delete(ctx, object{namespace, "pods", name}, &metav1.DeleteOptions{GracePeriodSeconds: &grace})
}

// RuntimeClasses are the RuntimeClasses the cluster offers, by name.
func (c *Cluster) RuntimeClasses(ctx context.Context) ([]string, error) {
	l := &nodev1.RuntimeClassList{}
	if err := list(ctx, c.node, "", "runtimeclasses", &metav1.ListOptions{}, l); err != nil {
		return nil, c.wrap("list RuntimeClasses", err)
	}
	var out []string
	for _, rc := range l.Items {
		out = append(out, rc.Name)
	}
	return out, nil
}

// Node looks a node up by name.
func (c *Cluster) Node(ctx context.Context, name string) (*corev1.Node, error) {
	n := &corev1.Node{}
	if err := c.get(ctx, object{resource: "nodes", name: name}, n); err != nil {
		return nil, c.wrap("look up node "+name, err)
	}
	return n, nil
}

// Nodes lists the nodes that carry the labels of selector (key=value,...).
func (c *Cluster) Nodes(ctx context.Context, selector string) ([]corev1.Node, error) {
	l := &corev1.NodeList{}
	if err := list(ctx, c.core, "", "nodes", &metav1.ListOptions{LabelSelector: selector}, l); err != nil {
		return nil, c.wrap("list nodes "+selector, err)
	}
	return l.Items, nil
}

// ParseSelector reads a node selector as a scenario writes it, labels
// the pods' nodes must all carry: key=value, separated by commas.
func ParseSelector(s string) (map[string]string, error) {
	m, err := labels.ConvertSelectorToLabelsMap(s)
	if err != nil {
		return nil, fmt.Errorf("%q: want key=value[,key=value...]: %v", s, err)
	}
	for k, v := range m {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("label %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, fmt.Errorf("label %s's value %q: %s", k, v, strings.Join(errs, "; "))
		}
	}
	return m, nil
}

// Pods lists the pods of a namespace that carry the labels.
func (c *Cluster) Pods(ctx context.Context, namespace string, labels map[string]string) ([]corev1.Pod, error) {
	var sel []string
	for k, v := range labels {
		sel = append(sel, k+"="+v)
	}
	l := &corev1.PodList{}
	if err := list(ctx, c.core, namespace, "pods", &metav1.ListOptions{LabelSelector: strings.Join(sel, ",")}, l); err != nil {
		return nil, c.wrap("list pods in "+namespace, err)
	}
	return l.Items, nil
}

// wrap says which cluster refused what; nil stays nil.
func (c *Cluster) wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("kubernetes %s: %s: %w", c.Server, what, err)
}

// ErrPodFailed is what WaitReady returns for a pod that will not become
// ready without a change (its image cannot be pulled, its container keeps
// exiting). One that no node takes yet is waited for: a node may be freed,
// or added.
var ErrPodFailed = errors.New("pod cannot start")

// Leftovers names what of a run is in the cluster: its namespace, and its
// pods in any namespace.
func (c *Cluster) Leftovers(ctx context.Context, runID string) ([]string, error) {
	var out []string
	ns := NamespaceOf(runID)
	err := c.get(ctx, object{resource: "namespaces", name: ns}, &corev1.Namespace{})
	switch {
	case err == nil:
		out = append(out, "namespace "+ns)
	case !apierrors.IsNotFound(err):
		return nil, c.wrap("look at namespace "+ns, err)
	}
	pods, err := c.Pods(ctx, metav1.NamespaceAll, map[string]string{LabelRun: runID})
	if err != nil {
		return nil, err
	}
	for _, p := range pods {
		out = append(out, "pod "+p.Namespace+"/"+p.Name)
	}
	return out, nil
}
