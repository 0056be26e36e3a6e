// Package secretstore encrypts the device's secrets at rest (device token,
// claim tokens). Sources: Windows DPAPI for the current user (windows
// builds), an XChaCha20-Poly1305 key kept in the OS keychain (the Secret
// Service over D-Bus on Linux, the Keychain on macOS), or such a key in a
// file the operator names (created 0600). There is no plaintext fallback.
//
// Sealed format: byte 0 is the format version (1), byte 1 the source kind
// (1 key file, 2 DPAPI, 3 keychain key), then the source's ciphertext: for
// a key (file or keychain) a 24-byte nonce followed by the AEAD output;
// for DPAPI the DPAPI blob. The
// caller's associated data binds a secret to its use (DPAPI: entropy).
package secretstore

import (
	"errors"
	"fmt"
)

// Sealer seals and opens secrets.
type Sealer interface {
	// Kind names the source: "keyfile", "dpapi" or "keychain".
	Kind() string
	// Seal encrypts plaintext bound to aad.
	Seal(plaintext, aad []byte) ([]byte, error)
	// Open decrypts a sealed value bound to aad; any damage → ErrDecrypt.
	Open(sealed, aad []byte) ([]byte, error)
}

// Kinds of sources.
const (
	KindKeyFile = "keyfile"
	KindDPAPI   = "dpapi"
	// KindKeychain: the key is in the OS keychain (Secret Service, macOS
	// Keychain) under a key id recorded in the state.
	KindKeychain = "keychain"
)

const (
	formatV1    = 1
	tagKeyFile  = 1
	tagDPAPI    = 2
	tagKeychain = 3
	headerBytes = 2
)

// Open returns the sealer for a stored kind: a key file at ref (a path),
// the platform's DPAPI, or the OS keychain's key ref (a key id).
func Open(kind, ref string) (Sealer, error) {
	switch kind {
	case KindKeyFile:
		return OpenKeyFile(ref)
	case KindDPAPI:
		return DPAPI()
	case KindKeychain:
		return OpenKeychainKey(ref)
	}
	return nil, fmt.Errorf("%w: unknown key source %q", ErrBadKeyFile, kind)
}

// ForEnrollment picks the key source at enrollment: the named key file
// (created when missing), else the platform's OS store (DPAPI on Windows;
// a new key in the OS keychain where one can be reached), else
// ErrNoKeySource. A keychain that can be reached but refuses (locked, no
// default collection) is an error of its own, not a silent fallback.
func ForEnrollment(keyPath string) (Sealer, error) {
	if keyPath != "" {
		return CreateKeyFile(keyPath)
	}
	s, err := DPAPI()
	if err == nil {
		return s, nil
	}
	s, err = CreateKeychainKey()
	if errors.Is(err, ErrUnavailable) {
		return nil, ErrNoKeySource
	}
	return s, err
}

func checkHeader(sealed []byte, tag byte) ([]byte, error) {
	if len(sealed) < headerBytes || sealed[0] != formatV1 || sealed[1] != tag {
		return nil, fmt.Errorf("%w: unknown format", ErrDecrypt)
	}
	return sealed[headerBytes:], nil
}
