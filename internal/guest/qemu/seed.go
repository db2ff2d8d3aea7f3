package qemu

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/vfleet/vfleet/internal/guest/qemu/vminit"
)

// A disk that boots through its own boot loader takes no kernel command
// line from vfleet, so its agent comes in through cloud-init: a NoCloud
// seed (an ISO 9660 disk labelled cidata) holds the agent, vfleet's
// parameters in command line syntax, and a user-data whose bootcmd copies
// both out of the seed and starts the agent, early in the boot, beside
// the image's own init. The image itself is not changed.

// seedLabel is the volume label cloud-init's NoCloud looks for.
const seedLabel = "cidata"

// seedFiles are the seed's files besides the agent, by name.
func seedFiles(hostname, params string) map[string]string {
	// The agent runs from the seed, mounted where it stays: the early
	// /run is noexec, and nothing is copied into the guest's disk. A
	// transient unit keeps the agent out of cloud-init's own, which
	// systemd would otherwise clean up with it; without systemd, setsid.
	// The unit must not wait for the boot: cloud-init's bootcmd runs
	// before sysinit.target, which a unit with default dependencies
	// waits for, and systemd-run would wait for that unit.
	const dir = "/run/vfleet-seed"
	start := dir + "/vfleet-agent " + vminit.SeedParamsArg + " " + dir + "/vfleet-params"
	script := strings.Join([]string{
		"mkdir -p " + dir,
		"mount -o ro -L " + seedLabel + " " + dir,
		"if command -v systemd-run >/dev/null; then systemd-run --no-block --unit=vfleet-agent -p DefaultDependencies=no" +
			" -p StandardOutput=journal+console -p StandardError=journal+console " + start +
			"; else setsid " + start + " </dev/null >/dev/console 2>&1 & fi",
	}, " && ")
	return map[string]string{
		"meta-data": fmt.Sprintf("instance-id: vfleet-%s\nlocal-hostname: %s\n", hostname, hostname),
		// vfleet configures the NIC itself, by its MAC, as on every VM;
		// an empty configuration keeps cloud-init from waiting on DHCP.
		"network-config": "version: 1\nconfig: []\n",
		"user-data":      "#cloud-config\nbootcmd:\n  - [sh, -c, " + yamlQuote(script) + "]\n",
		"vfleet-params":  params + "\n",
	}
}

// yamlQuote is s as a YAML double-quoted scalar.
func yamlQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// writeSeed makes the seed disk at dst with genisoimage, the agent at
// agentBinary going in as vfleet-agent.
func writeSeed(ctx context.Context, genisoimage, dst, agentBinary, hostname, params string) error {
	dir, err := os.MkdirTemp(filepath.Dir(dst), ".seed-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for name, text := range seedFiles(hostname, params) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return fmt.Errorf("cloud-init seed: %w", err)
		}
	}
	agentBin, err := os.ReadFile(agentBinary)
	if err != nil {
		return fmt.Errorf("cloud-init seed: agent: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "vfleet-agent"), agentBin, 0o755); err != nil {
		return fmt.Errorf("cloud-init seed: %w", err)
	}
	// -r: Rock Ridge, so names and the agent's mode survive; -J: Joliet,
	// which cloud-init's own reader of the seed prefers.
	out, err := exec.CommandContext(ctx, genisoimage, "-quiet", "-output", dst, "-volid", seedLabel, "-r", "-J", dir).CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("cloud-init seed: genisoimage: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
