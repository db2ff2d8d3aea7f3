package image

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestPushIsPulledAsItWasMade pushes a small root file system to a
// registry on loopback (go-containerregistry's, which speaks the
// distribution API) and pulls it back as a cluster's node would: one
// layer holding the tree, the agent as the entrypoint, the architecture
// and labels given, and the reference by digest what the registry holds.
func TestPushIsPulledAsItWasMade(t *testing.T) {
	root := t.TempDir()
	for path, body := range map[string]string{"usr/local/bin/vfleet-agent": "agent", "etc/hostname": "x\n"} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, path), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ref := host + "/vfleet/agent:test"

	ctx := context.Background()
	byDigest, err := Push(ctx, root, ref, PushOptions{Arch: "arm64", Entrypoint: []string{AgentPath}, Labels: map[string]string{"dev.vfleet.recipe": "abc"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(byDigest, host+"/vfleet/agent@sha256:") {
		t.Errorf("reference by digest %q", byDigest)
	}
	pulled, err := remote.Image(must(t, func() (name.Reference, error) { return name.ParseReference(byDigest) }), remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if tagged, err := remote.Image(must(t, func() (name.Reference, error) { return name.ParseReference(ref) }), remote.WithContext(ctx)); err != nil {
		t.Fatal(err)
	} else if a, b := must(t, tagged.Digest), must(t, pulled.Digest); a != b {
		t.Errorf("tag and digest differ: %s %s", a, b)
	}
	cfg, err := pulled.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Architecture != "arm64" || cfg.OS != "linux" || strings.Join(cfg.Config.Entrypoint, " ") != AgentPath || cfg.Config.Labels["dev.vfleet.recipe"] != "abc" {
		t.Errorf("config %+v", cfg)
	}
	layers, err := pulled.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d: %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files[h.Name] = string(b)
	}
	if files["usr/local/bin/vfleet-agent"] != "agent" || files["etc/hostname"] != "x\n" {
		t.Errorf("layer holds %v", files)
	}

	if _, err := Push(ctx, root, "Not A Reference", PushOptions{}); err == nil || !strings.Contains(err.Error(), `"Not A Reference"`) {
		t.Errorf("a bad reference: %v", err)
	}
}

func must[T any](t *testing.T, f func() (T, error)) T {
	t.Helper()
	v, err := f()
	if err != nil {
		t.Fatal(err)
	}
	return v
}
