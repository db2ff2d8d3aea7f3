package session

import (
	"context"
	"testing"

	"github.com/vfleet/vfleet/internal/image"
	"github.com/vfleet/vfleet/internal/workload"
)

// Every run records the version of each program a registered workload
// runs from a Debian package, as the image's package list has it.
func TestFingerprintRecordsEveryWorkloadsPackage(t *testing.T) {
	img := &image.Image{Manifest: image.Manifest{Hash: "h", Packages: map[string]string{"procps": "2:4.0.2-3"}}}
	for _, name := range workload.Names() {
		w, _ := workload.Lookup(name)
		for _, p := range w.Programs() {
			if p.Package != "" {
				img.Manifest.Packages[p.Package] = "1.0-" + p.Name
			}
		}
	}
	fp, err := fingerprint(context.Background(), img, nil)
	if err != nil {
		t.Fatal(err)
	}
	for pkg, v := range img.Manifest.Packages {
		if pkg == "procps" {
			if _, ok := fp.ToolVersions[pkg]; ok {
				t.Errorf("records %s, which no workload runs", pkg)
			}
			continue
		}
		if fp.ToolVersions[pkg] != v {
			t.Errorf("%s recorded as %q, want %q", pkg, fp.ToolVersions[pkg], v)
		}
	}
}
