package kube

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// WaitReady waits until the pod is Ready and returns it as it then is; a
// pod that cannot get there without a change (ErrPodFailed) ends the wait
// at once, with the cluster's reason. When seen is not nil, the moment
// each of its start's Phases was first seen passed goes into it: told of
// every change by a watch, to the millisecond, where the API server keeps
// the conditions' times to the second.
func (c *Cluster) WaitReady(ctx context.Context, namespace, name string, seen map[string]time.Time) (*corev1.Pod, error) {
	for {
		pod := &corev1.Pod{}
		if err := c.get(ctx, object{namespace, "pods", name}, pod); err != nil {
			return nil, c.wrap("look at pod "+namespace+"/"+name, err)
		}
		if seen != nil {
			now := time.Now()
			for _, cond := range pod.Status.Conditions {
				if _, ok := seen[string(cond.Type)]; !ok && cond.Status == corev1.ConditionTrue && slices.Contains(Phases, cond.Type) {
					seen[string(cond.Type)] = now
				}
			}
		}
		if Ready(pod) {
			return pod, nil
		}
		if err := Stuck(pod); err != nil {
			return pod, c.wrap("pod "+namespace+"/"+name, err)
		}
		// Told of the pod's next change rather than asking again and again:
		// a fleet's pods start together.
		w, err := c.core.Get().Namespace(namespace).Resource("pods").VersionedParams(&metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
			ResourceVersion: pod.ResourceVersion,
			Watch:           true,
		}, params).Watch(ctx)
		if err != nil {
			return pod, c.wrap("watch pod "+namespace+"/"+name, err)
		}
		err = waitEvent(ctx, w)
		w.Stop()
		if err != nil {
			why := notReady(pod)
			if warn := c.lastWarning(namespace, name); warn != "" {
				why += "; the cluster warned: " + warn
			}
			return pod, c.wrap("pod "+namespace+"/"+name+" not ready ("+why+")", err)
		}
	}
}

// lastWarning is the latest Warning event of each reason a pod has
// (the kubelet's "FailedCreatePodSandBox: ..."), latest first, which say
// why a pod waits where its status says only what it waits in
// ("ContainerCreating"); empty if there is none or they cannot be read.
func (c *Cluster) lastWarning(namespace, name string) string {
	// The caller's context ended: a few seconds of its own.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l := &corev1.EventList{}
	if err := list(ctx, c.core, namespace, "events", &metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.kind": "Pod", "involvedObject.name": name, "type": corev1.EventTypeWarning}.String()}, l); err != nil {
		return ""
	}
	return latestWarnings(l.Items)
}

// maxWarnings bounds the reasons an error quotes: a benign warning that
// recurs (a node without cluster DNS) does not hide the one that says why,
// and an error stays a few lines.
const maxWarnings = 3

func latestWarnings(events []corev1.Event) string {
	last := map[string]*corev1.Event{}
	for i := range events {
		e := &events[i]
		if l, ok := last[e.Reason]; !ok || eventTime(e).After(eventTime(l)) {
			last[e.Reason] = e
		}
	}
	byTime := slices.SortedFunc(maps.Values(last), func(a, b *corev1.Event) int { return eventTime(b).Compare(eventTime(a)) })
	var out []string
	for _, e := range byTime[:min(len(byTime), maxWarnings)] {
		out = append(out, e.Reason+": "+strings.TrimSpace(e.Message))
	}
	return strings.Join(out, "; ")
}

// eventTime is when an event last happened, as either API fills it in.
func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// waitEvent waits for the watch's first event, or its end; either way the
// pod is looked at again.
func waitEvent(ctx context.Context, w watch.Interface) error {
	select {
	case <-w.ResultChan():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Ready says whether the pod's Ready condition holds.
func Ready(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// stuckReasons are the reasons a container waits for that no wait ends:
// the image, the pod's spec or the container itself must change. (An
// image that failed once to pull, ErrImagePull, is tried again first; one
// the pod may not pull and the node lacks, ErrImageNeverPull, never is.)
var stuckReasons = []string{"ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "CrashLoopBackOff", "RunContainerError"}

// Stuck says why the pod will not become ready as it is (ErrPodFailed),
// or nil while it still may.
func Stuck(pod *corev1.Pod) error {
	switch pod.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		return fmt.Errorf("%w: it is %s: %s %s", ErrPodFailed, pod.Status.Phase, pod.Status.Reason, pod.Status.Message)
	}
	for _, s := range append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...) {
		if w := s.State.Waiting; w != nil && slices.Contains(stuckReasons, w.Reason) {
			return fmt.Errorf("%w: container %s: %s: %s", ErrPodFailed, s.Name, w.Reason, w.Message)
		}
	}
	return nil
}

// notReady says what the pod waits for, as its status last said: a node
// that takes it (no node may be free until others leave, or one is added),
// its image, its container.
func notReady(pod *corev1.Pod) string {
	why := "phase " + string(pod.Status.Phase)
	for _, c := range pod.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			why += "; " + string(c.Type) + ": " + c.Message
		}
	}
	for _, s := range pod.Status.ContainerStatuses {
		if w := s.State.Waiting; w != nil {
			why += "; container " + s.Name + " " + w.Reason
		}
	}
	return why
}

// Phases of a pod's start-up, as its conditions mark them and as
// kube-burner's pod latency measurement names them, in the order they
// pass.
var Phases = []corev1.PodConditionType{corev1.PodScheduled, corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady}

// StartLatency is, for each phase the pod has passed, by the name of its
// condition, the time from its creation to the condition turning true.
// The API server keeps both times to the second, so each is a whole
// number of seconds.
func StartLatency(pod *corev1.Pod) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, c := range pod.Status.Conditions {
		if c.Status == corev1.ConditionTrue && slices.Contains(Phases, c.Type) && !c.LastTransitionTime.IsZero() {
			out[string(c.Type)] = max(0, c.LastTransitionTime.Sub(pod.CreationTimestamp.Time))
		}
	}
	return out
}
