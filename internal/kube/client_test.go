package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// apiServer is a fake API server: it answers each request from a table
// of canned objects by method and path, and keeps every request, so a
// test can say what vfleet asked a cluster, byte for byte of the URL.
type apiServer struct {
	t    *testing.T
	mu   sync.Mutex
	asks []string // "METHOD PATH?QUERY"
	body map[string]runtime.Object
	// answer is what to send for "METHOD PATH"; absent is NotFound. A
	// function answers by call count (the first GET of a pod, the next).
	answer map[string]func(n int) (int, any)
	calls  map[string]int
}

func newAPIServer(t *testing.T) (*apiServer, Target) {
	s := &apiServer{t: t, body: map[string]runtime.Object{}, answer: map[string]func(int) (int, any){}, calls: map[string]int{}}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	kubeconfig := filepath.Join(t.TempDir(), "config")
	config := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: %q}}]
users: [{name: fake, user: {token: fake}}]
contexts: [{name: fake, context: {cluster: fake, user: fake}}]
current-context: fake
`, srv.URL)
	if err := os.WriteFile(kubeconfig, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return s, Target{Kubeconfig: kubeconfig}
}

// on sets the answer to method and path, counting its calls from 0.
func (s *apiServer) on(method, path string, f func(n int) (int, any)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answer[method+" "+path] = f
	s.calls[method+" "+path] = 0
}

func always(code int, obj any) func(int) (int, any) { return func(int) (int, any) { return code, obj } }

func (s *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Method + " " + r.URL.Path
	s.mu.Lock()
	ask := key
	if r.URL.RawQuery != "" {
		ask += "?" + r.URL.RawQuery
	}
	s.asks = append(s.asks, ask)
	if b, _ := io.ReadAll(r.Body); len(b) > 0 {
		// JSON or protobuf, as the client chose.
		obj, _, err := codecs.UniversalDeserializer().Decode(b, nil, nil)
		if err != nil {
			s.t.Errorf("%s: body (%s) not read: %v", ask, r.Header.Get("Content-Type"), err)
		}
		s.body[key] = obj
	}
	n := s.calls[key]
	s.calls[key]++
	f, ok := s.answer[key]
	s.mu.Unlock()
	code, obj := http.StatusNotFound, any(&metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound, Message: r.URL.Path + " not found"})
	if ok {
		code, obj = f(n)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if ev, ok := obj.(watchEvent); ok {
		// A watch: one event, then the stream ends.
		json.NewEncoder(w).Encode(ev)
		return
	}
	json.NewEncoder(w).Encode(obj)
}

type watchEvent struct {
	Type   string `json:"type"`
	Object any    `json:"object"`
}

func (s *apiServer) asked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.asks)
}

func pod(ns, name, rv string, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: status}}}}
}

// TestWhatVfleetAsksTheAPIServer pins each call of the client to the
// request it makes: the resource's path, the options in its query or
// body, and how the answer (NotFound, a list, a watch's event) is read.
func TestWhatVfleetAsksTheAPIServer(t *testing.T) {
	s, target := newAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Connect(target)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "vfleet-r1"
	labels := map[string]string{LabelManagedBy: ManagedBy, LabelRun: "r1"}

	s.on("POST", "/api/v1/namespaces", always(http.StatusCreated, &corev1.Namespace{TypeMeta: metav1.TypeMeta{Kind: "Namespace", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	if err := c.CreateNamespace(ctx, ns, labels); err != nil {
		t.Fatal(err)
	}
	if got, ok := s.body["POST /api/v1/namespaces"].(*corev1.Namespace); !ok || got.Labels[LabelRun] != "r1" {
		t.Errorf("namespace asked: %#v, want the run's label", s.body["POST /api/v1/namespaces"])
	}

	p := AgentPod{Namespace: ns, Name: "p", Labels: labels, Image: "vfleet", AgentPath: "/agent", SocketDir: "/s", ScratchDir: "/w"}.Pod()
	s.on("POST", "/api/v1/namespaces/"+ns+"/pods", always(http.StatusCreated, pod(ns, "p", "1", false)))
	if err := c.CreatePod(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got, ok := s.body["POST /api/v1/namespaces/"+ns+"/pods"].(*corev1.Pod); !ok || got.Spec.Containers[0].Image != "vfleet" {
		t.Errorf("pod asked: %#v, want vfleet's image", s.body["POST /api/v1/namespaces/"+ns+"/pods"])
	}

	// Not ready, a watch from its version, one event, then ready.
	s.on("GET", "/api/v1/namespaces/"+ns+"/pods/p", func(n int) (int, any) { return http.StatusOK, pod(ns, "p", fmt.Sprint(5+n), n > 0) })
	s.on("GET", "/api/v1/namespaces/"+ns+"/pods", always(http.StatusOK, watchEvent{Type: "MODIFIED", Object: pod(ns, "p", "6", true)}))
	seen := map[string]time.Time{}
	got, err := c.WaitReady(ctx, ns, "p", seen)
	if err != nil {
		t.Fatal(err)
	}
	if !Ready(got) || got.ResourceVersion != "6" {
		t.Errorf("WaitReady returned version %s, ready %v; want the ready one, 6", got.ResourceVersion, Ready(got))
	}
	if _, ok := seen[string(corev1.PodScheduled)]; !ok {
		t.Errorf("phases seen %v, want PodScheduled among them", seen)
	}

	s.on("GET", "/apis/node.k8s.io/v1/runtimeclasses", always(http.StatusOK, &nodev1.RuntimeClassList{TypeMeta: metav1.TypeMeta{Kind: "RuntimeClassList", APIVersion: "node.k8s.io/v1"},
		Items: []nodev1.RuntimeClass{{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc"}}}))
	if rcs, err := c.RuntimeClasses(ctx); err != nil || !slices.Equal(rcs, []string{"gvisor"}) {
		t.Errorf("RuntimeClasses = %v, %v; want [gvisor]", rcs, err)
	}

	nodes := &corev1.NodeList{TypeMeta: metav1.TypeMeta{Kind: "NodeList", APIVersion: "v1"}, Items: []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}}
	s.on("GET", "/api/v1/nodes", always(http.StatusOK, nodes))
	if l, err := c.Nodes(ctx, "zone=a"); err != nil || len(l) != 1 || l[0].Name != "n1" {
		t.Errorf("Nodes = %v, %v; want n1", l, err)
	}
	s.on("GET", "/api/v1/nodes/n1", always(http.StatusOK, &corev1.Node{TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "n1"}}))
	if n, err := c.Node(ctx, "n1"); err != nil || n.Name != "n1" {
		t.Errorf("Node = %v, %v; want n1", n, err)
	}
	if _, err := c.Node(ctx, "n2"); err == nil || !strings.Contains(err.Error(), "look up node n2") {
		t.Errorf("a missing node: %v, want what was asked in the error", err)
	}

	// Deleted: gone at the second look.
	s.on("DELETE", "/api/v1/namespaces/"+ns+"/pods/p", always(http.StatusOK, pod(ns, "p", "7", true)))
	s.on("GET", "/api/v1/namespaces/"+ns+"/pods/p", func(n int) (int, any) {
		if n == 0 {
			return http.StatusOK, pod(ns, "p", "7", true)
		}
		return http.StatusNotFound, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound}
	})
	if err := c.DeletePod(ctx, ns, "p"); err != nil {
		t.Fatal(err)
	}
	if d, ok := s.body["DELETE /api/v1/namespaces/"+ns+"/pods/p"].(*metav1.DeleteOptions); !ok || d.GracePeriodSeconds == nil || *d.GracePeriodSeconds != podGrace {
		t.Errorf("pod deleted with %#v, want a grace of %d s", s.body["DELETE /api/v1/namespaces/"+ns+"/pods/p"], podGrace)
	}
	// Already gone: not an error.
	if err := c.DeleteNamespace(ctx, "vfleet-r2"); err != nil {
		t.Errorf("deleting a namespace that is gone: %v", err)
	}

	s.on("GET", "/api/v1/pods", always(http.StatusOK, &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: []corev1.Pod{*pod("other", "q", "1", true)}}))
	if left, err := c.Leftovers(ctx, "r2"); err != nil || !slices.Equal(left, []string{"pod other/q"}) {
		t.Errorf("Leftovers = %v, %v; want the pod in another namespace", left, err)
	}

	s.on("GET", "/api/v1/namespaces/"+ns+"/events", always(http.StatusOK, &corev1.EventList{TypeMeta: metav1.TypeMeta{Kind: "EventList", APIVersion: "v1"},
		Items: []corev1.Event{{Reason: "FailedCreatePodSandBox", Message: "no network"}}}))
	if w := c.lastWarning(ns, "p"); w != "FailedCreatePodSandBox: no network" {
		t.Errorf("lastWarning = %q", w)
	}

	// An exec the server refuses: the stream's error says so.
	conn, err := c.Exec(ctx, ns, "p", AgentContainer, []string{"/agent", "--stdio"})
	if err != nil {
		t.Fatal(err)
	}
	conn.Read(make([]byte, 1))
	conn.Close()
	if err := conn.Err(); err == nil || !strings.Contains(err.Error(), "exec in vfleet-r1/p") {
		t.Errorf("a refused exec: %v", err)
	}

	want := []string{
		"POST /api/v1/namespaces",
		"POST /api/v1/namespaces/vfleet-r1/pods",
		"GET /api/v1/namespaces/vfleet-r1/pods/p",
		"GET /api/v1/namespaces/vfleet-r1/pods?fieldSelector=metadata.name%3Dp&resourceVersion=5&watch=true",
		"GET /api/v1/namespaces/vfleet-r1/pods/p",
		"GET /apis/node.k8s.io/v1/runtimeclasses",
		"GET /api/v1/nodes?labelSelector=zone%3Da",
		"GET /api/v1/nodes/n1",
		"GET /api/v1/nodes/n2",
		"DELETE /api/v1/namespaces/vfleet-r1/pods/p",
		"GET /api/v1/namespaces/vfleet-r1/pods/p",
		"GET /api/v1/namespaces/vfleet-r1/pods/p",
		"DELETE /api/v1/namespaces/vfleet-r2",
		"GET /api/v1/namespaces/vfleet-r2",
		"GET /api/v1/namespaces/vfleet-r2",
		"GET /api/v1/pods?labelSelector=vfleet.dev%2Frun%3Dr2",
		"GET /api/v1/namespaces/vfleet-r1/events?fieldSelector=involvedObject.kind%3DPod%2CinvolvedObject.name%3Dp%2Ctype%3DWarning",
	}
	exec := "/api/v1/namespaces/vfleet-r1/pods/p/exec?command=%2Fagent&command=--stdio&container=agent&stderr=true&stdin=true&stdout=true"
	// WebSocket first; a NotFound is no reason to try SPDY.
	want = append(want, "GET "+exec)
	if got := s.asked(); !slices.Equal(got, want) {
		t.Errorf("asked the API server:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
