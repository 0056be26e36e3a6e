package secretstore

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/crypto/chacha20poly1305"
)

// keyFileHeader starts every key file; the rest is the base64url key.
const keyFileHeader = "taskledger-key-v1 "

// keyFile is an XChaCha20-Poly1305 key, from a key file or (tag
// tagKeychain) the OS keychain under keyID.
type keyFile struct {
	key   []byte
	tag   byte
	keyID string
}

// CreateKeyFile opens the key file at path, creating it (mode 0600,
// exclusive create, fsynced with its directory) with a fresh random key
// when it does not exist.
func CreateKeyFile(path string) (Sealer, error) {
	if path == "" {
		return nil, ErrNoKeySource
	}
	key := make([]byte, chacha20poly1305.KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("secretstore: random key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return OpenKeyFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: cannot create %s: %v", ErrBadKeyFile, path, err)
	}
	text := keyFileHeader + base64.RawURLEncoding.EncodeToString(key) + "\n"
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: write: %v", ErrBadKeyFile, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: sync: %v", ErrBadKeyFile, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("%w: close: %v", ErrBadKeyFile, err)
	}
	syncDir(filepath.Dir(path))
	return &keyFile{key: key, tag: tagKeyFile}, nil
}

// OpenKeyFile reads an existing key file; it must not be accessible by
// group or others (on Unix).
func OpenKeyFile(path string) (Sealer, error) {
	if path == "" {
		return nil, ErrNoKeySource
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadKeyFile, path, errors.Unwrap(err))
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrBadKeyFile, path)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s is accessible by other users (chmod 600)", ErrBadKeyFile, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadKeyFile, path, errors.Unwrap(err))
	}
	text, ok := bytes.CutPrefix(bytes.TrimRight(data, "\r\n"), []byte(keyFileHeader))
	if !ok {
		return nil, fmt.Errorf("%w: %s is not a taskledger key file", ErrBadKeyFile, path)
	}
	key, err := base64.RawURLEncoding.DecodeString(string(text))
	if err != nil || len(key) != chacha20poly1305.KeySize {
		return nil, fmt.Errorf("%w: %s is damaged", ErrBadKeyFile, path)
	}
	return &keyFile{key: key, tag: tagKeyFile}, nil
}

func (k *keyFile) Kind() string {
	if k.tag == tagKeychain {
		return KindKeychain
	}
	return KindKeyFile
}

// KeyID names the key in the OS keychain ("" for a key file).
func (k *keyFile) KeyID() string { return k.keyID }

func (k *keyFile) Seal(plaintext, aad []byte) ([]byte, error) {
	aead, err := chacha20poly1305.NewX(k.key)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("secretstore: nonce: %w", err)
	}
	out := []byte{formatV1, k.tag}
	out = append(out, nonce...)
	return aead.Seal(out, nonce, plaintext, aad), nil
}

func (k *keyFile) Open(sealed, aad []byte) ([]byte, error) {
	body, err := checkHeader(sealed, k.tag)
	if err != nil {
		return nil, err
	}
	aead, err := chacha20poly1305.NewX(k.key)
	if err != nil {
		return nil, err
	}
	if len(body) < aead.NonceSize()+aead.Overhead() {
		return nil, fmt.Errorf("%w: too short", ErrDecrypt)
	}
	pt, err := aead.Open(nil, body[:aead.NonceSize()], body[aead.NonceSize():], aad)
	if err != nil {
		return nil, fmt.Errorf("%w: authentication failed", ErrDecrypt)
	}
	return pt, nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}
