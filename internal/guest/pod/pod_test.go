package pod

import (
	"errors"
	"strings"
	"testing"

	"github.com/vfleet/vfleet/internal/guest"
)

func podSpec(name string) guest.Spec {
	return guest.Spec{Name: name, Kind: KindName, Own: guest.Own{}.With(fieldImage, "registry.example/vfleet:1")}
}

// TestNewRefusesWhatAPodCannotDo: each field a pod cannot honour is
// refused by New, before anything reaches a cluster, saying why.
func TestNewRefusesWhatAPodCannotDo(t *testing.T) {
	t.Setenv(EnvImage, "")
	k := kind{}
	for _, c := range []struct {
		what string
		edit func(*guest.Spec)
		want string
	}{
		{"no image", func(s *guest.Spec) { s.Own = nil }, "pod_image is missing"},
		{"host cpus", func(s *guest.Spec) { s.CPUs = "0" }, "cpu_limit caps"},
		{"host image", func(s *guest.Spec) { s.Image = "/srv/img.tar" }, "give the image's reference"},
		{"real time", func(s *guest.Spec) { s.RTPriority = 10 }, "rt_priority"},
		{"a run's network", func(s *guest.Spec) { s.NetNS = "/run/netns/x" }, "joins no run's network"},
		{"a tap", func(s *guest.Spec) { s.Tap = &guest.TapConfig{Name: "t"} }, "joins no run's network"},
		{"a name Kubernetes refuses", func(s *guest.Spec) { s.Name = "Pod_0" }, "cannot name a Kubernetes object"},
		{"a pull policy", func(s *guest.Spec) { s.Own = s.Own.With(fieldPull, "sometimes") }, "image_pull"},
		{"a profile", func(s *guest.Spec) { s.Security = guest.SecurityUnconfined }, "unconfined"},
		{"a node and a selector", func(s *guest.Spec) { s.Own = s.Own.With(fieldNode, "n1").With(fieldSelector, "a=b") }, "give one"},
		{"a selector of no labels", func(s *guest.Spec) { s.Own = s.Own.With(fieldSelector, "lab") }, "node_selector"},
		{"a bare pod under a RuntimeClass", func(s *guest.Spec) { s.Own = s.Own.With(fieldBare, "true"); s.Runtime = "gvisor" }, "leave runtime out"},
		{"a bare pod with limits", func(s *guest.Spec) { s.Own = s.Own.With(fieldBare, "true"); s.MemoryBytes = 1 << 30 }, "leave them out"},
		{"a bare pod with a profile", func(s *guest.Spec) { s.Own = s.Own.With(fieldBare, "true"); s.Security = guest.SecurityDefault }, "leave security out"},
	} {
		s := podSpec("pod-0")
		c.edit(&s)
		_, err := k.New(s, guest.Env{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to say %q", c.what, err, c.want)
		}
	}
	if _, err := k.New(podSpec("pod-0"), guest.Env{}); err != nil {
		t.Errorf("a pod of its image alone: %v", err)
	}
	if _, err := k.New(podSpec("pod-0"), guest.Env{Detached: true}); !errors.Is(err, guest.ErrNotDetachable) {
		t.Errorf("a detached pod: err = %v, want ErrNotDetachable", err)
	}
}

// TestImageFromTheEnvironment: a group without pod_image takes the
// environment's, so that a built-in runs on a user's cluster; its own
// wins.
func TestImageFromTheEnvironment(t *testing.T) {
	t.Setenv(EnvImage, "registry.example/vfleet@sha256:1")
	s := podSpec("pod-0")
	s.Own = nil
	if _, err := (kind{}).New(s, guest.Env{}); err != nil || imageOf(s) != "registry.example/vfleet@sha256:1" {
		t.Errorf("image %q, err %v; want the environment's", imageOf(s), err)
	}
	if got := imageOf(podSpec("pod-0")); got != "registry.example/vfleet:1" {
		t.Errorf("image %q, want the group's own", got)
	}
	t.Setenv(EnvImage, "")
	if _, err := (kind{}).New(s, guest.Env{}); err == nil || !strings.Contains(err.Error(), EnvImage) {
		t.Errorf("err = %v, want it to name %s", err, EnvImage)
	}
}

func TestNamespaceIsMadeOnceAndLeftByTheLast(t *testing.T) {
	n := namespaceUsers{users: map[string]*namespaceUse{}}
	a, b := n.use("k"), n.use("k")
	if a != b {
		t.Fatal("two guests of one namespace count apart")
	}
	made := 0
	for _, u := range []*namespaceUse{a, b} {
		u.once.Do(func() { made++ })
	}
	if made != 1 {
		t.Errorf("namespace made %d times", made)
	}
	if n.leave("k", a) {
		t.Error("the first guest to leave deletes the namespace of another")
	}
	if !n.leave("k", b) {
		t.Error("the last guest to leave keeps the namespace")
	}
	if c := n.use("k"); c == a {
		t.Error("a namespace made anew after its last guest left reuses the old one's record")
	}
}
