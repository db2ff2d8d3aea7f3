package kube

import (
	"context"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
)

// scheme holds only the API types vfleet sends and reads: version 1 of
// the core and node.k8s.io groups and the meta types (options, lists,
// statuses) they share. client-go's typed clients register every API
// group of Kubernetes in theirs, which was a fifth of vfleet's compile for
// types it never uses; its REST client works from any scheme.
var (
	scheme = runtime.NewScheme()
	codecs = serializer.NewCodecFactory(scheme)
	params = runtime.NewParameterCodec(scheme)
)

func init() {
	utilruntime.Must(corev1.AddToScheme(scheme))
	utilruntime.Must(nodev1.AddToScheme(scheme))
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
}

// restClient is a REST client of one group version at apiPath ("/api"
// for the core group, "/apis" for the others) of config's API server.
func restClient(config *rest.Config, apiPath string, gv schema.GroupVersion) (*rest.RESTClient, error) {
	c := rest.CopyConfig(config)
	c.APIPath = apiPath
	c.GroupVersion = &gv
	c.NegotiatedSerializer = codecs.WithoutConversion()
	// As client-go's typed clients speak to the API server for its own
	// types: protobuf, smaller and quicker to read than JSON.
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return rest.RESTClientFor(c)
}

// object names one object of the core group: its namespace (empty for a
// cluster's), its resource and its name.
type object struct{ namespace, resource, name string }

// String names it as errors do: "pod NAMESPACE/NAME", "node NAME".
func (o object) String() string {
	what := strings.TrimSuffix(o.resource, "s")
	if o.namespace == "" {
		return what + " " + o.name
	}
	return what + " " + o.namespace + "/" + o.name
}

func (c *Cluster) request(verb string, o object) *rest.Request {
	return c.core.Verb(verb).NamespaceIfScoped(o.namespace, o.namespace != "").Resource(o.resource).Name(o.name)
}

// get reads o into into; a NotFound error is the API server's, for
// apierrors.IsNotFound.
func (c *Cluster) get(ctx context.Context, o object, into runtime.Object) error {
	return c.request(http.MethodGet, o).Do(ctx).Into(into)
}

// list reads the list of resource in namespace (empty: every namespace,
// or a cluster's resource) that opts select, from client rc.
func list(ctx context.Context, rc *rest.RESTClient, namespace, resource string, opts *metav1.ListOptions, into runtime.Object) error {
	return rc.Get().NamespaceIfScoped(namespace, namespace != "").Resource(resource).VersionedParams(opts, params).Do(ctx).Into(into)
}

// goneWait bounds the wait for a deleted object: a pod's node must stop
// its containers, a namespace's controller empty it.
const goneWait = 2 * time.Minute

// delete deletes o (gone already is no error) and waits until the
// cluster says it is gone: a pod until its node has stopped its
// containers, a namespace until its controller has emptied it, not only
// until the API server has marked them.
func (c *Cluster) delete(ctx context.Context, o object, opts *metav1.DeleteOptions) error {
	err := c.request(http.MethodDelete, o).Body(opts).Do(ctx).Error()
	if err != nil && !apierrors.IsNotFound(err) {
		return c.wrap("delete "+o.String(), err)
	}
	ctx, cancel := context.WithTimeout(ctx, goneWait)
	defer cancel()
	for {
		err := c.request(http.MethodGet, o).Do(ctx).Error()
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case ctx.Err() != nil:
			return c.wrap(o.String()+" still there after "+goneWait.String(), ctx.Err())
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}
