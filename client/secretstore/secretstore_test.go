package secretstore

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestKeyFileRoundTripAndDamage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.key")
	s, err := CreateKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" {
		st, _ := os.Stat(path)
		if st.Mode().Perm() != 0o600 {
			t.Fatalf("key file mode %v", st.Mode().Perm())
		}
	}
	secret := []byte("tldev_secret-token-value")
	sealed, err := s.Seal(secret, []byte("aad"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, secret) {
		t.Fatal("plaintext inside the sealed value")
	}
	// Reopening the existing file gives the same key.
	s2, err := CreateKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s2.Open(sealed, []byte("aad"))
	if err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("%q %v", got, err)
	}
	// Every flipped byte, another AAD, or truncation: ErrDecrypt.
	for i := range sealed {
		bad := append([]byte(nil), sealed...)
		bad[i] ^= 0x01
		if _, err := s2.Open(bad, []byte("aad")); !errors.Is(err, ErrDecrypt) {
			t.Fatalf("flip at %d: %v", i, err)
		}
	}
	if _, err := s2.Open(sealed, []byte("other")); !errors.Is(err, ErrDecrypt) {
		t.Fatal("AAD not bound")
	}
	if _, err := s2.Open(sealed[:10], []byte("aad")); !errors.Is(err, ErrDecrypt) {
		t.Fatal("truncation accepted")
	}
	// Another key cannot open it.
	other, _ := CreateKeyFile(filepath.Join(t.TempDir(), "other.key"))
	if _, err := other.Open(sealed, []byte("aad")); !errors.Is(err, ErrDecrypt) {
		t.Fatal("other key opened it")
	}
}

func TestKeyFileRefusals(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenKeyFile(filepath.Join(dir, "missing")); !errors.Is(err, ErrBadKeyFile) {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "junk")
	os.WriteFile(junk, []byte("not a key"), 0o600)
	if _, err := CreateKeyFile(junk); !errors.Is(err, ErrBadKeyFile) {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" {
		p := filepath.Join(dir, "open.key")
		if _, err := CreateKeyFile(p); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, 0o644)
		if _, err := OpenKeyFile(p); !errors.Is(err, ErrBadKeyFile) {
			t.Fatalf("world-readable key accepted: %v", err)
		}
	}
}

// Without a key file (and without an OS store) enrollment refuses.
func TestNoKeySource(t *testing.T) {
	useFakeKeychain(t, false)
	if runtime.GOOS == "windows" {
		s, err := ForEnrollment("")
		if err != nil || s.Kind() != KindDPAPI {
			t.Fatalf("%v %v", s, err)
		}
		return
	}
	if _, err := ForEnrollment(""); !errors.Is(err, ErrNoKeySource) {
		t.Fatal(err)
	}
}
