// Package secretstore encrypts the device's secrets at rest (device token,
// claim tokens). Sources: Windows DPAPI for the current user (windows
// builds), or an XChaCha20-Poly1305 key in a file the operator names
// (created 0600). There is no plaintext fallback.
//
// Sealed format: byte 0 is the format version (1), byte 1 the source kind
// (1 key file, 2 DPAPI), then the source's ciphertext: for a key file a
// 24-byte nonce followed by the AEAD output; for DPAPI the DPAPI blob. The
// caller's associated data binds a secret to its use (DPAPI: entropy).
package secretstore

import "fmt"

// Sealer seals and opens secrets.
type Sealer interface {
	// Kind names the source: "keyfile" or "dpapi".
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
)

const (
	formatV1    = 1
	tagKeyFile  = 1
	tagDPAPI    = 2
	headerBytes = 2
)

// Open returns the sealer for a stored kind: a key file at keyPath, or the
// platform's DPAPI.
func Open(kind, keyPath string) (Sealer, error) {
	switch kind {
	case KindKeyFile:
		return OpenKeyFile(keyPath)
	case KindDPAPI:
		return DPAPI()
	}
	return nil, fmt.Errorf("%w: unknown key source %q", ErrBadKeyFile, kind)
}

// ForEnrollment picks the key source at enrollment: the named key file
// (created when missing), else the platform's OS store, else ErrNoKeySource.
func ForEnrollment(keyPath string) (Sealer, error) {
	if keyPath != "" {
		return CreateKeyFile(keyPath)
	}
	s, err := DPAPI()
	if err == nil {
		return s, nil
	}
	return nil, ErrNoKeySource
}

func checkHeader(sealed []byte, tag byte) ([]byte, error) {
	if len(sealed) < headerBytes || sealed[0] != formatV1 || sealed[1] != tag {
		return nil, fmt.Errorf("%w: unknown format", ErrDecrypt)
	}
	return sealed[headerBytes:], nil
}
