package report

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vfleet/vfleet/internal/testutil"
)

// TestHTMLRendersInABrowser opens the report in headless Chromium, as a
// reader would, and checks that the plots are really drawn: the screenshot
// must hold the colours of the baseline's and of a worse group's bars, and
// of the first two curves of the latency CDF (far more pixels than their
// legend swatches alone would give).
func TestHTMLRendersInABrowser(t *testing.T) {
	run, samples, failures := fullFixture()
	var page bytes.Buffer
	if err := WriteHTML(&page, Build(run, samples, failures), samples); err != nil {
		t.Fatal(err)
	}
	img := screenshot(t, page.Bytes(), 5600)
	requireColours(t, img, map[string][3]uint32{"baseline bar": {0xc2, 0xc9, 0xd0}, "worse bar": {0xd0, 0x66, 0x4f}}, 200)
	requireColours(t, img, map[string][3]uint32{"first CDF curve": {0x00, 0x72, 0xb2}, "second CDF curve": {0xd5, 0x5e, 0x00}}, 200)
}

// TestScalingPlotRendersInABrowser renders a run whose only lines are
// its scaling curves (no latency CDF shares their colours): each group's
// line must be on screen.
func TestScalingPlotRendersInABrowser(t *testing.T) {
	run, samples, failures := fixture()
	samples = addThroughputEntries(samples)
	c := Build(run, samples, failures)
	if len(c.Scaling) == 0 {
		t.Fatal("the fixture has no scaling curve to draw")
	}
	var page bytes.Buffer
	if err := WriteHTML(&page, c, samples); err != nil {
		t.Fatal(err)
	}
	img := screenshot(t, page.Bytes(), 4200)
	requireColours(t, img, map[string][3]uint32{"first group's scaling line": {0x00, 0x72, 0xb2}, "second group's scaling line": {0xd5, 0x5e, 0x00}}, 200)
}

// TestFrontierRendersInABrowser: the frontier's line and points, and the
// points off it, must be on screen in their own colours.
func TestFrontierRendersInABrowser(t *testing.T) {
	var page bytes.Buffer
	if err := WriteHTML(&page, spectrum(), nil); err != nil {
		t.Fatal(err)
	}
	img := screenshot(t, page.Bytes(), 2400)
	requireColours(t, img, map[string][3]uint32{"frontier line and points": {0x6a, 0x3d, 0x9a}}, 600)
	// Two points of radius 6, less their outline.
	requireColours(t, img, map[string][3]uint32{"points off the frontier": {0xf0, 0xb4, 0x29}}, 120)
}

// TestABHTMLRendersInABrowser does the same for the A/B page: the worse and
// the better bar and the noise-floor band must be on screen.
func TestABHTMLRendersInABrowser(t *testing.T) {
	var page bytes.Buffer
	if err := WriteABHTML(&page, abFixture()); err != nil {
		t.Fatal(err)
	}
	img := screenshot(t, page.Bytes(), 1400)
	requireColours(t, img, map[string][3]uint32{
		"worse bar": {0xd0, 0x66, 0x4f}, "better bar": {0x5a, 0xa8, 0x6a}, "noise band": {0xf1, 0xec, 0xe0},
	}, 200)
}

// screenshot renders page in headless Chromium in a window height pixels
// tall and returns what it drew.
func screenshot(t *testing.T, page []byte, height int) image.Image {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a browser: skipped with -short")
	}
	testutil.RequiresTool(t, "chromium", "chromium")
	dir := t.TempDir()
	html := filepath.Join(dir, "report.html")
	shot := filepath.Join(dir, "shot.png")
	if err := os.WriteFile(html, page, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// The flags keep Chromium off the network: the page must need none.
	cmd := exec.CommandContext(ctx, "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--window-size=1000,"+strconv.Itoa(height),
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
			t.Errorf("console message while rendering the page: %s", line)
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
	return img
}

// requireColours fails unless each named colour covers at least min pixels
// of img: a plot that did not render leaves its colours out.
func requireColours(t *testing.T, img image.Image, want map[string][3]uint32, min int) {
	t.Helper()
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
	t.Logf("pixels of each colour: %v", found)
	for name := range want {
		if found[name] < min {
			t.Errorf("%s: %d pixels of its colour in the screenshot; the plot did not render", name, found[name])
		}
	}
}

func near8(v16, v8 uint32) bool {
	d := int(v16>>8) - int(v8)
	return d >= -6 && d <= 6
}
