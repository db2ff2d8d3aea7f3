package testutil

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TarGz is a gzip-compressed tar of regular files, by name.
func TarGz(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range files {
		h := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg,
			Uid: os.Getuid(), Gid: os.Getgid()}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// OCILayout writes, under a new directory, an OCI image layout of one
// image for this host's platform whose layers are the given blobs, as
// they are: a blob that is no gzip-compressed tar makes a corrupt image
// whose descriptors all match. It returns the layout and the path of each
// layer's blob, which a test may swap for other bytes.
func OCILayout(t testing.TB, layers ...[]byte) (dir string, blobs []string) {
	t.Helper()
	dir = t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o755); err != nil {
		t.Fatal(err)
	}
	type desc struct {
		MediaType string `json:"mediaType"`
		Digest    string `json:"digest"`
		Size      int    `json:"size"`
	}
	put := func(mediaType string, b []byte) desc {
		sum := fmt.Sprintf("%x", sha256.Sum256(b))
		path := filepath.Join(dir, "blobs", "sha256", sum)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		blobs = append(blobs, path)
		return desc{mediaType, "sha256:" + sum, len(b)}
	}
	var descs []desc
	var diffIDs []string
	for _, l := range layers {
		descs = append(descs, put("application/vnd.oci.image.layer.v1.tar+gzip", l))
		tarBytes := l
		if zr, err := gzip.NewReader(bytes.NewReader(l)); err == nil {
			if b, err := io.ReadAll(zr); err == nil {
				tarBytes = b
			}
		}
		diffIDs = append(diffIDs, fmt.Sprintf("sha256:%x", sha256.Sum256(tarBytes)))
	}
	layerBlobs := blobs
	blobs = nil
	mustJSON := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cfg := put("application/vnd.oci.image.config.v1+json", mustJSON(map[string]any{
		"architecture": runtime.GOARCH, "os": "linux",
		"config": map[string]any{"Env": []string{"PATH=/bin"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs},
	}))
	manifest := put("application/vnd.oci.image.manifest.v1+json", mustJSON(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json", "config": cfg, "layers": descs,
	}))
	for name, b := range map[string][]byte{
		"oci-layout": []byte(`{"imageLayoutVersion":"1.0.0"}`),
		"index.json": mustJSON(map[string]any{"schemaVersion": 2, "manifests": []desc{manifest}}),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, layerBlobs
}
