package report

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/testutil"
)

// TestHTMLRendersInABrowser opens the report in headless Chromium, as a
// reader would, and checks that the plots are really drawn: the screenshot
// must hold the colours of the baseline's and of a worse group's bars.
func TestHTMLRendersInABrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser: skipped with -short")
	}
	testutil.RequiresTool(t, "chromium", "chromium")
	run, samples, failures := fixture()
	var page bytes.Buffer
	if err := WriteHTML(&page, Build(run, samples, failures), samples); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	html := filepath.Join(dir, "report.html")
	shot := filepath.Join(dir, "shot.png")
	if err := os.WriteFile(html, page.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// The flags keep Chromium off the network: the page must need none.
	cmd := exec.CommandContext(ctx, "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--window-size=1000,1400",
		"--enable-logging=stderr", "--v=0", "--screenshot="+shot, "file://"+html)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, "CONSOLE") || strings.Contains(line, "Uncaught") {
			t.Errorf("console message while rendering the report: %s", line)
		}
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][3]uint32{"baseline bar": {0xc2, 0xc9, 0xd0}, "worse bar": {0xd0, 0x66, 0x4f}}
	found := map[string]int{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			for name, c := range want {
				if near8(r, c[0]) && near8(g, c[1]) && near8(bl, c[2]) {
					found[name]++
				}
			}
		}
	}
	t.Logf("pixels of each bar colour: %v", found)
	for name := range want {
		if found[name] < 200 {
			t.Errorf("%s: %d pixels of its colour in the screenshot; the plots did not render", name, found[name])
		}
	}
}

func near8(v16, v8 uint32) bool {
	d := int(v16>>8) - int(v8)
	return d >= -6 && d <= 6
}
