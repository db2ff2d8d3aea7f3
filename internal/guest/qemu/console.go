package qemu

import (
	"bytes"
	"strings"
)

// panicMarker starts the line a panicking kernel prints last on its
// console, with the reason after it.
const panicMarker = "Kernel panic - not syncing"

// PanicLine returns the kernel panic line of a serial console log, or ""
// when the kernel did not panic.
func PanicLine(console []byte) string {
	i := bytes.Index(console, []byte(panicMarker))
	if i < 0 {
		return ""
	}
	line := console[i:]
	if j := bytes.IndexAny(line, "\r\n"); j >= 0 {
		line = line[:j]
	}
	return strings.TrimSpace(string(line))
}

// tailLines returns at most the last n lines of a log, without carriage
// returns, for error messages.
func tailLines(b []byte, n int) string {
	s := strings.TrimRight(strings.ReplaceAll(string(b), "\r", ""), "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// bootHint explains console symptoms whose cause is known.
func bootHint(console []byte) string {
	// q35 also fails the PIT calibration on a busy host, but falls back
	// on its HPET; the second line says there was nothing to fall back on.
	if bytes.Contains(console, []byte("tsc: Unable to calibrate against PIT")) &&
		bytes.Contains(console, []byte("No reference (HPET/PMTIMER) available")) {
		return "the guest kernel could not calibrate its clock against the PIT; microvm has no HPET or ACPI PM timer to fall back on: use runtime q35, or KVM"
	}
	return ""
}

// initExitPrefix starts the line the guest's init prints on the console
// when it gives up (the kernel then panics, as init exited).
const initExitPrefix = "vfleet-agent: "

// InitError returns the last line the guest's init printed about why it
// gave up before the kernel panicked, or "".
func InitError(console []byte) string {
	if i := bytes.Index(console, []byte(panicMarker)); i >= 0 {
		console = console[:i]
	}
	last := ""
	for _, line := range strings.Split(strings.ReplaceAll(string(console), "\r", ""), "\n") {
		if j := strings.Index(line, initExitPrefix); j >= 0 {
			last = strings.TrimSpace(line[j+len(initExitPrefix):])
		}
	}
	return last
}

// GoCrash returns the line a Go program (the agent) prints on the console
// when its runtime gives up ("fatal error: …", "panic: …"), or "".
func GoCrash(console []byte) string {
	for _, line := range strings.Split(strings.ReplaceAll(string(console), "\r", ""), "\n") {
		if strings.HasPrefix(line, "fatal error: ") || strings.HasPrefix(line, "panic: ") {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// seedHint explains a disk booted through UEFI whose agent never came:
// the agent comes from a cloud-init seed, which an image without
// cloud-init ignores. "" when the console shows cloud-init ran.
func seedHint(console []byte) string {
	if bytes.Contains(console, []byte("cloud-init")) {
		return ""
	}
	return "the console shows no cloud-init: a disk booted through UEFI (firmware: uefi) gets vfleet's agent from a cloud-init NoCloud seed, so its image needs cloud-init; or boot the disk with its own kernel (kernel:, initrd:, cmdline:), which needs nothing in the image"
}
