package image

import (
	"fmt"
	"io"
	"strings"
)

// CPIOWriter writes a cpio archive in the "newc" format the kernel unpacks
// as an initramfs (see the kernel's early-userspace buffer-format text).
// Only what an initramfs needs is supported: directories, regular files
// and character devices, written in the order given, parents first.
type CPIOWriter struct {
	w   io.Writer
	ino uint32
	err error
}

// NewCPIOWriter returns a writer on w; Close writes the trailer.
func NewCPIOWriter(w io.Writer) *CPIOWriter { return &CPIOWriter{w: w} }

// Mode bits of the cpio header, as in stat(2).
const (
	cpioDir  = 0o040000
	cpioFile = 0o100000
	cpioChar = 0o020000
)

// Dir adds a directory.
func (c *CPIOWriter) Dir(name string, perm uint32) {
	c.entry(name, cpioDir|perm, 0, 0, nil)
}

// File adds a regular file with the given content.
func (c *CPIOWriter) File(name string, perm uint32, data []byte) {
	c.entry(name, cpioFile|perm, 0, 0, data)
}

// CharDev adds a character device node.
func (c *CPIOWriter) CharDev(name string, perm uint32, major, minor uint32) {
	c.entry(name, cpioChar|perm, major, minor, nil)
}

// Close writes the trailer that ends the archive and reports the first
// error met.
func (c *CPIOWriter) Close() error {
	c.header("TRAILER!!!", 0, 0, 0, 0, 0)
	return c.err
}

func (c *CPIOWriter) entry(name string, mode, major, minor uint32, data []byte) {
	name = strings.TrimPrefix(name, "/")
	c.ino++
	c.header(name, c.ino, mode, uint32(len(data)), major, minor)
	c.write(data)
	c.pad(len(data))
}

// header writes one newc header and the name, each padded to 4 bytes.
func (c *CPIOWriter) header(name string, ino, mode, size, rmajor, rminor uint32) {
	nlink := uint32(1)
	if mode&cpioDir != 0 {
		nlink = 2
	}
	h := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		ino, mode, 0, 0, nlink, 0, size, 0, 0, rmajor, rminor, len(name)+1, 0)
	c.write([]byte(h))
	c.write(append([]byte(name), 0))
	c.pad(len(h) + len(name) + 1)
}

func (c *CPIOWriter) pad(n int) {
	if r := n % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}

func (c *CPIOWriter) write(b []byte) {
	if c.err != nil || len(b) == 0 {
		return
	}
	_, c.err = c.w.Write(b)
}
