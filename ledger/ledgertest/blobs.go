package ledgertest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"taskledger/ledger"
)

// RunBlobs runs the blob store conformance tests; open gives a store over
// the same content each time it is called.
func RunBlobs(t *testing.T, open func(t *testing.T) ledger.BlobStore) {
	t.Run("PutGetByContent", func(t *testing.T) {
		b := open(t)
		data := bytes.Repeat([]byte("evidence "), 50_000) // spans several chunks
		sha, err := b.Put(data)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if sha != hex.EncodeToString(sum[:]) {
			t.Fatalf("name %s is not the content's SHA-256", sha)
		}
		again, err := b.Put(data)
		if err != nil || again != sha {
			t.Fatalf("second put: %s, %v", again, err)
		}
		got, err := open(t).Get(sha)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("get from another opening: %d bytes, %v", len(got), err)
		}
		empty, err := b.Put(nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := b.Get(empty); err != nil || len(got) != 0 {
			t.Fatalf("empty blob: %q, %v", got, err)
		}
	})
	t.Run("UnknownOrMalformedNameNotFound", func(t *testing.T) {
		b := open(t)
		for _, name := range []string{strings.Repeat("0", 64), "../etc/passwd", strings.Repeat("A", 64), ""} {
			if _, err := b.Get(name); !errors.Is(err, ledger.ErrNotFound) {
				t.Errorf("Get(%q): %v, want ErrNotFound", name, err)
			}
		}
	})
}
