package image

import (
	"archive/tar"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func writeTar(t *testing.T, path string, files map[string]string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

// Whatever a user points image at, the error says what the path holds and
// what was expected there.
func TestCheckOCIExplainsWhatIsWrong(t *testing.T) {
	dir := t.TempDir()
	notTar := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notTar, []byte("hello, this is not an archive at all, just text long enough"), 0o644); err != nil {
		t.Fatal(err)
	}
	noManifest := filepath.Join(dir, "rootfs.tar")
	writeTar(t, noManifest, map[string]string{"etc/hostname": "x\n"})
	badLayout := filepath.Join(dir, "layout")
	if err := os.MkdirAll(badLayout, 0o755); err != nil {
		t.Fatal(err)
	}
	brokenIndex := filepath.Join(dir, "broken")
	if err := os.MkdirAll(brokenIndex, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"oci-layout": `{"imageLayoutVersion":"1.0.0"}`, "index.json": `{"schemaVersion":2,"manifests":[]}`} {
		if err := os.WriteFile(filepath.Join(brokenIndex, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	emptyOCITar := filepath.Join(dir, "empty-oci.tar")
	writeTar(t, emptyOCITar, map[string]string{"oci-layout": `{"imageLayoutVersion":"1.0.0"}`, "index.json": `{"schemaVersion":2,"manifests":[]}`})
	for path, want := range map[string]string{
		filepath.Join(dir, "gone"): "no such file or directory",
		notTar:                     "not a directory or a tar archive",
		noManifest:                 "a tar archive with no image manifest: neither an OCI archive (oci-layout and index.json) nor a docker save archive (manifest.json)",
		badLayout:                  "a directory without oci-layout is not an OCI image layout",
		brokenIndex:                "no image for linux/",
		emptyOCITar:                "no image for linux/",
	} {
		err := CheckOCI(t.TempDir(), path)
		if !errors.Is(err, ErrBadOCI) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", filepath.Base(path), err, want)
		}
	}
}

// A blob is judged at its end: another blob of the same size by its
// digest, a longer one as soon as it is longer, a shorter one by its size.
func TestVerifierRefusesAnotherBlob(t *testing.T) {
	want, _, err := v1.SHA256(strings.NewReader("genuine"))
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyBytes([]byte("genuine"), "config", want, 7); err != nil {
		t.Errorf("the genuine blob: %v", err)
	}
	for _, tc := range []struct{ blob, msg string }{
		{"GENUINE", "config: blob does not match its descriptor: 7 bytes of digest sha256:"},
		{"genuine!", "config: blob does not match its descriptor: longer than its 7 bytes"},
		{"genuin", "config: blob does not match its descriptor: 6 bytes of digest"},
	} {
		err := verifyBytes([]byte(tc.blob), "config", want, 7)
		if !errors.Is(err, ErrBlobMismatch) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%q: %v, want %q", tc.blob, err, tc.msg)
		}
	}
}
