//go:build windows

package secretstore

import (
	"bytes"
	"errors"
	"testing"
)

// DPAPI seals for the current user: a round trip gives the plaintext back,
// and a damaged ciphertext, a truncated one, another header or another
// associated value never opens.
func TestDPAPIRoundTripAndDamage(t *testing.T) {
	s, err := DPAPI()
	if err != nil {
		t.Fatal(err)
	}
	secret, aad := []byte("device token 0123456789abcdef"), []byte("taskledger/device-token")
	sealed, err := s.Seal(secret, aad)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, secret) {
		t.Fatal("the sealed value holds the plaintext")
	}
	got, err := s.Open(sealed, aad)
	if err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("round trip: %q %v", got, err)
	}
	damaged := map[string][]byte{
		"flipped byte": func() []byte { b := bytes.Clone(sealed); b[len(b)/2] ^= 0x01; return b }(),
		"last byte":    func() []byte { b := bytes.Clone(sealed); b[len(b)-1] ^= 0x80; return b }(),
		"truncated":    sealed[:len(sealed)-8],
		"header only":  sealed[:2],
		"other tag":    func() []byte { b := bytes.Clone(sealed); b[1] ^= 0xff; return b }(),
	}
	for name, b := range damaged {
		if _, err := s.Open(b, aad); !errors.Is(err, ErrDecrypt) {
			t.Errorf("%s: %v, want ErrDecrypt", name, err)
		}
	}
	if _, err := s.Open(sealed, []byte("another purpose")); !errors.Is(err, ErrDecrypt) {
		t.Errorf("another associated value: %v, want ErrDecrypt", err)
	}
}
