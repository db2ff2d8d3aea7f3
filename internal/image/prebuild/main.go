// Command prebuild builds vfleet's default guest image, without its agent,
// into vfleet's state directory: the part of `vfleet image build` that
// takes a minute, as a program that needs only the image package.
//
// On a fresh machine compiling vfleet takes a minute and a half of both
// cores, and building the image takes most of a minute of one (mmdebstrap,
// dpkg): scripts/quickstart.sh compiles and runs this first, then builds
// the image with it while vfleet compiles. vfleet installs its agent into
// the image when it first uses it, as it does whenever the agent changed.
package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/vfleet/vfleet/internal/image"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "usage: prebuild (the state directory is VFLEET_STATE_DIR, else "+image.DefaultRoot+")")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	img, err := image.Ensure(ctx, image.EnsureOptions{
		Root:     cmp.Or(os.Getenv("VFLEET_STATE_DIR"), image.DefaultRoot),
		Recipe:   image.DefaultRecipe(),
		Progress: func(line string) { fmt.Fprintln(os.Stderr, "image:", line) },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "prebuild:", err)
		os.Exit(1)
	}
	fmt.Printf("image %.12s: %s\n", img.Manifest.Hash, img.RootFS)
}
