//go:build !failpoints

package failpoint

import (
	"errors"
	"testing"
)

// Without the tag nothing can be enabled and every point is a no-op.
func TestReleaseBuildHasNoFailpoints(t *testing.T) {
	t.Setenv(Env, BlobWrite+"=enospc")
	if Enabled {
		t.Fatal("Enabled in a build without the tag")
	}
	if _, err := Enable(BlobWrite, "enospc"); !errors.Is(err, ErrNotBuilt) {
		t.Fatalf("Enable = %v, want ErrNotBuilt", err)
	}
	if err := Eval(BlobWrite); err != nil {
		t.Fatalf("Eval = %v in a build without the tag", err)
	}
}
