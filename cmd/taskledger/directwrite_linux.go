package main

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// directBlock is the size of the aligned blocks an O_DIRECT archive is
// written in (a multiple of every logical block size).
const directBlock = 1 << 20

// openDirect opens path for writing with O_DIRECT: the archive's bytes go
// to the disk without passing through (and evicting) the page cache, which
// on a busy host writes several times faster than buffered writes and a
// final fsync. ok is false where the file system refuses O_DIRECT (tmpfs):
// the caller then writes the usual way.
func openDirect(path string) (f *os.File, ok bool, err error) {
	f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_DIRECT, 0o600)
	if err == nil {
		return f, true, nil
	}
	f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	return f, false, err
}

// directWriter gathers writes into one aligned block and writes each full
// block with O_DIRECT; Flush writes the last, partial block after turning
// O_DIRECT off for the file (its length need not be aligned).
type directWriter struct {
	f   *os.File
	buf []byte // directBlock bytes, 4096-aligned
	n   int
}

func newDirectWriter(f *os.File) *directWriter {
	raw := make([]byte, directBlock+4096)
	off := int(4096-uintptr(unsafe.Pointer(&raw[0]))%4096) % 4096
	return &directWriter{f: f, buf: raw[off : off+directBlock]}
}

func (d *directWriter) Write(p []byte) (int, error) {
	total := len(p)
	for len(p) > 0 {
		c := copy(d.buf[d.n:], p)
		d.n += c
		p = p[c:]
		if d.n == len(d.buf) {
			if _, err := d.f.Write(d.buf); err != nil {
				return total - len(p), err
			}
			d.n = 0
		}
	}
	return total, nil
}

// Flush writes what is left, without O_DIRECT.
func (d *directWriter) Flush() error {
	if d.n == 0 {
		return nil
	}
	flags, err := unix.FcntlInt(d.f.Fd(), unix.F_GETFL, 0)
	if err == nil {
		_, err = unix.FcntlInt(d.f.Fd(), unix.F_SETFL, flags&^unix.O_DIRECT)
	}
	if err == nil {
		_, err = d.f.Write(d.buf[:d.n])
	}
	d.n = 0
	return err
}
