package regfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// A bounded copy refuses a file over its bound before reading it, and
// what is not a regular file before opening it.
func TestCopyIsBounded(t *testing.T) {
	f := filepath.Join(t.TempDir(), "initrd")
	if err := os.WriteFile(f, make([]byte, 4097), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := Copy(io.Discard, f, 4097); err != nil || n != 4097 {
		t.Errorf("at the bound: %d bytes, %v", n, err)
	}
	if n, err := Copy(io.Discard, f, 4096); !errors.Is(err, ErrTooLarge) || n != 0 {
		t.Errorf("over the bound: %d bytes copied, err = %v", n, err)
	}
	if _, err := Copy(io.Discard, "/dev/zero", 4096); !errors.Is(err, ErrNotRegular) {
		t.Errorf("/dev/zero: err = %v", err)
	}
}

func TestBytesSaysTheWholeUnit(t *testing.T) {
	for n, want := range map[int64]string{256 << 20: "256 MiB", 2 << 30: "2 GiB", 1 << 40: "1 TiB", 3072: "3 KiB", 1536: "1536 bytes", 1000: "1000 bytes"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
