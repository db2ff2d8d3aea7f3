package doctor

import (
	"context"
	"fmt"
	"os"
	"time"
)

// BootProbe boots kernel under QEMU with the accelerator ("kvm" or "tcg"),
// without a disk, and returns how long the kernel took to get to mounting
// its root. It is the test behind doctor's KVM and TCG checks, exported so
// that VM guests choose their accelerator by the very same test: a
// /dev/kvm that opens can still fail to run a guest. For "kvm" the device
// must first open read-write. Nothing the probe starts outlives it.
func BootProbe(ctx context.Context, qemu, accel, kernel string, timeout time.Duration) (time.Duration, error) {
	if accel == "kvm" {
		f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
		if err != nil {
			return 0, fmt.Errorf("kvm: %w", err)
		}
		f.Close()
	}
	took, err := bootKernel(ctx, qemu, accel, kernel, timeout)
	if err != nil {
		return 0, fmt.Errorf("boot a kernel under %s: %w", accel, err)
	}
	return took, nil
}
