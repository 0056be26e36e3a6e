//go:build !linux

package main

import (
	"bufio"
	"io"
	"os"
)

// openDirect opens path for writing (O_DIRECT is Linux's; ok is false).
func openDirect(path string) (*os.File, bool, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	return f, false, err
}

// newDirectWriter is not used where openDirect never succeeds.
func newDirectWriter(f *os.File) interface {
	io.Writer
	Flush() error
} {
	return bufio.NewWriterSize(f, 1<<20)
}
