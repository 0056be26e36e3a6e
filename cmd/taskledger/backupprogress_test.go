package main

import (
	"io"
	"testing"

	"github.com/schollz/progressbar/v3"
)

// The backup's progress total is an estimate: passing it must not fail
// the copy (progressbar refuses to go past its maximum).
func TestBackupProgressBarNeverFailsTheCopy(t *testing.T) {
	bar := progressbar.NewOptions64(10, progressbar.OptionSetWriter(io.Discard), progressbar.OptionShowBytes(true))
	w := io.MultiWriter(io.Discard, barWriter{bar})
	for range 3 {
		if n, err := w.Write(make([]byte, 7)); err != nil || n != 7 {
			t.Fatalf("write past the estimate: %d %v", n, err)
		}
	}
	if got := bar.State().CurrentNum; got != 21 {
		t.Fatalf("bar at %d, want 21", got)
	}
}
