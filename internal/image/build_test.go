package image_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/image/native"
	"github.com/vfleet/vfleet/internal/testutil"
)

// TestInterruptedBuildLeavesNothing cancels a real build part-way, while
// its packages are installed in the tree: no half image and no temporary
// directory may remain, and what the build mounts in the tree is never in
// the host's mount table (the build has a mount namespace of its own).
func TestInterruptedBuildLeavesNothing(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.RequiresTool(t, "mmdebstrap", "mmdebstrap")
	root := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	installing := make(chan struct{}, 1)
	go func() {
		select {
		case <-installing:
		case <-ctx.Done():
			return
		}
		time.Sleep(time.Second)
		points, err := testutil.MountPoints("/proc")
		if err != nil {
			t.Error(err)
		}
		for _, p := range points {
			if strings.HasPrefix(p, root+"/") {
				t.Errorf("the build's mount %s is in the host's mount table", p)
			}
		}
		cancel()
	}()
	_, err := image.Ensure(ctx, image.EnsureOptions{Root: root, Recipe: image.DefaultRecipe(),
		Progress: func(line string) {
			if strings.HasPrefix(line, "I: installing essential packages") {
				installing <- struct{}{}
			}
		}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	entries, _ := os.ReadDir(filepath.Join(root, "images"))
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".lock") {
			t.Errorf("left in the images directory: %s", e.Name())
		}
	}
	if _, err := image.Open(root, image.DefaultRecipe()); !errors.Is(err, image.ErrNotBuilt) {
		t.Fatalf("Open after an interrupted build: %v", err)
	}
}

// TestEnsureReusesAndReinstallsAgent uses the shared test image: a second
// Ensure must not rebuild, and a changed agent must be installed in place.
func TestEnsureReusesAndReinstallsAgent(t *testing.T) {
	img := testutil.Image(t)
	if img.Manifest.Packages["fio"] == "" || img.KernelPath == "" {
		t.Fatalf("image lacks fio or a kernel: %+v", img.Manifest)
	}
	// vfleet's VMs boot with an initramfs of its own: the kernel's
	// package made none.
	if img.InitrdPath != "" {
		t.Errorf("the image has an initrd: %s", img.InitrdPath)
	}
	agent := testutil.BuildAgent(t)
	changed := filepath.Join(t.TempDir(), "vfleet-agent")
	data, _ := os.ReadFile(agent)
	os.WriteFile(changed, append(data, 0), 0o755)

	began := time.Now()
	again, err := image.Ensure(context.Background(), image.EnsureOptions{Root: testutil.StateRoot(), Recipe: image.DefaultRecipe(), AgentBinary: changed})
	if err != nil {
		t.Fatal(err)
	}
	if again.Manifest.Built != img.Manifest.Built {
		t.Fatal("a cached image was rebuilt")
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("reusing the image took %s", took)
	}
	installed, _ := os.ReadFile(filepath.Join(again.RootFS, image.AgentPath))
	if !bytes.Equal(installed, append(data, 0)) {
		t.Fatal("changed agent not installed")
	}
	// Put the real agent back for the other tests.
	if _, err := image.Ensure(context.Background(), image.EnsureOptions{Root: testutil.StateRoot(), Recipe: image.DefaultRecipe(), AgentBinary: agent}); err != nil {
		t.Fatal(err)
	}
}

func TestMissingBuilderNamesThePackage(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := image.Ensure(context.Background(), image.EnsureOptions{Root: t.TempDir(), Recipe: image.DefaultRecipe()})
	if !errors.Is(err, image.ErrMissingTool) || !strings.Contains(err.Error(), "Debian package mmdebstrap") {
		t.Fatalf("err = %v", err)
	}
}

// The image carries vfleet's own programs built from the source in this
// tree: an image built from another source would have another recipe.
func TestImageProgramsMatchTheirSource(t *testing.T) {
	img := testutil.Image(t)
	if img.Manifest.Recipe.Programs != native.Hash() {
		t.Fatalf("image recipe programs %q, want %q", img.Manifest.Recipe.Programs, native.Hash())
	}
	for _, p := range native.Programs {
		if err := native.Identify(context.Background(), p, filepath.Join(img.RootFS, p.Path())); err != nil {
			t.Errorf("in the image: %v", err)
		}
	}
}
