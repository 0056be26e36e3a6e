package checkpoint_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"taskledger/audit/checkpoint"
)

func mustKey(t *testing.T) (*checkpoint.Key, string) {
	t.Helper()
	dir := t.TempDir()
	k, created, err := checkpoint.LoadOrCreateKey(dir)
	if err != nil || !created {
		t.Fatalf("create key: %v (created %v)", err, created)
	}
	return k, dir
}

func TestKeyIsCreatedOnceWithMode0600(t *testing.T) {
	k, dir := mustKey(t)
	st, err := os.Stat(filepath.Join(dir, checkpoint.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %#o", st.Mode().Perm())
	}
	again, created, err := checkpoint.LoadOrCreateKey(dir)
	if err != nil || created || again.Verifier() != k.Verifier() {
		t.Fatalf("second load: created %v, err %v, same key %v", created, err, again != nil && again.Verifier() == k.Verifier())
	}
	if !strings.HasPrefix(k.Verifier(), k.Origin()+"+") || strings.Contains(k.Verifier(), "PRIVATE") {
		t.Fatalf("verifier %q does not name the origin %q or holds the private key", k.Verifier(), k.Origin())
	}
}

func TestKeyReadableByOthersIsRefused(t *testing.T) {
	_, dir := mustKey(t)
	if err := os.Chmod(filepath.Join(dir, checkpoint.KeyFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.LoadKey(dir); !errors.Is(err, checkpoint.ErrKeyMode) {
		t.Fatalf("got %v, want ErrKeyMode", err)
	}
}

func TestDamagedKeyIsRefusedWithoutQuotingIt(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, checkpoint.KeyFile), []byte("PRIVATE+KEY+secretstuff\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := checkpoint.LoadKey(dir)
	if !errors.Is(err, checkpoint.ErrKey) || strings.Contains(err.Error(), "secretstuff") {
		t.Fatalf("got %v", err)
	}
	if _, err := checkpoint.LoadKey(t.TempDir()); !errors.Is(err, checkpoint.ErrNoKey) {
		t.Fatalf("empty dir: got %v", err)
	}
}

func TestSignedCheckpointOpensWithItsVerifier(t *testing.T) {
	k, _ := mustKey(t)
	root := bytes.Repeat([]byte{7}, 32)
	signed, err := k.Sign(checkpoint.Checkpoint{Size: 42, Root: root, Time: 1764623304123})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := checkpoint.Open(signed, k.Verifier())
	if err != nil {
		t.Fatal(err)
	}
	if cp.Origin != k.Origin() || cp.Size != 42 || !bytes.Equal(cp.Root, root) || cp.Time != 1764623304123 {
		t.Fatalf("opened %+v", cp)
	}
	if !strings.Contains(string(signed), "\ntime 2025-12-01T21:08:24.123Z\n\n— "+k.Origin()+" ") {
		t.Fatalf("note text:\n%s", signed)
	}
}

func TestCheckpointOfAnotherKeyIsRefused(t *testing.T) {
	k, _ := mustKey(t)
	other, _ := mustKey(t)
	signed, err := other.Sign(checkpoint.Checkpoint{Size: 1, Root: make([]byte, 32), Time: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.Open(signed, k.Verifier()); !errors.Is(err, checkpoint.ErrSignature) {
		t.Fatalf("got %v, want ErrSignature", err)
	}
	if _, err := checkpoint.Open(signed, "not a verifier"); !errors.Is(err, checkpoint.ErrVerifier) {
		t.Fatalf("got %v, want ErrVerifier", err)
	}
}

func TestEveryFlippedByteOfACheckpointIsRefused(t *testing.T) {
	k, _ := mustKey(t)
	signed, err := k.Sign(checkpoint.Checkpoint{Size: 9, Root: bytes.Repeat([]byte{1}, 32), Time: 5})
	if err != nil {
		t.Fatal(err)
	}
	for i := range signed {
		for _, bit := range []byte{0x01, 0x80} {
			b := append([]byte(nil), signed...)
			b[i] ^= bit
			if _, err := checkpoint.Open(b, k.Verifier()); err == nil {
				t.Fatalf("byte %d ^ %#x opened", i, bit)
			}
		}
	}
}
