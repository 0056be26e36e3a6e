package secretstore

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"golang.org/x/crypto/chacha20poly1305"
)

// KeychainService is the service name of every key the agent keeps in the
// OS keychain; the account is the key's id (a UUID, recorded in the state).
const KeychainService = "taskledger-agent"

// keychainTimeout bounds one keychain call: a locked keyring can ask for
// a prompt nobody answers on a headless machine.
const keychainTimeout = 15 * time.Second

// keychainStore is the OS keychain: the Secret Service (D-Bus) on Linux,
// the Keychain on macOS. Tests replace it.
type keychainStore interface {
	// available reports whether the store can be reached at all.
	available() bool
	set(service, account, secret string) error
	get(service, account string) (string, error)
	del(service, account string) error
}

// keychain is the store in use (osKeychain, or a fake in tests).
var keychain keychainStore = osKeychain{}

// errKeychainNotFound: no secret under that service and account.
var errKeychainNotFound = errors.New("secretstore: no such keychain entry")

// withTimeout runs f, giving up after keychainTimeout (f goes on in the
// background; its result is dropped).
func withTimeout(f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	t := time.NewTimer(keychainTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("%w: the OS keychain did not answer within %s (locked?)", ErrKeychain, keychainTimeout)
	}
}

// CreateKeychainKey creates a fresh random key in the OS keychain under a
// new id, reads it back, and returns its sealer (KeyID names it).
func CreateKeychainKey() (Sealer, error) {
	if !keychain.available() {
		return nil, ErrUnavailable
	}
	key := make([]byte, chacha20poly1305.KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("secretstore: random key: %w", err)
	}
	id := uuid.NewString()
	text := base64.RawURLEncoding.EncodeToString(key)
	if err := withTimeout(func() error { return keychain.set(KeychainService, id, text) }); err != nil {
		return nil, fmt.Errorf("%w: store the key: %v", ErrKeychain, err)
	}
	s, err := OpenKeychainKey(id)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// OpenKeychainKey reads the key id from the OS keychain.
func OpenKeychainKey(id string) (Sealer, error) {
	if id == "" {
		return nil, fmt.Errorf("%w: no key id recorded", ErrKeychain)
	}
	if !keychain.available() {
		return nil, fmt.Errorf("%w: the OS keychain (Secret Service / Keychain) cannot be reached", ErrKeychain)
	}
	var text string
	err := withTimeout(func() error {
		var err error
		text, err = keychain.get(KeychainService, id)
		return err
	})
	if errors.Is(err, errKeychainNotFound) {
		return nil, fmt.Errorf("%w: key %s is not in the OS keychain", ErrKeychain, id)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: read key %s: %v", ErrKeychain, id, err)
	}
	key, err := base64.RawURLEncoding.DecodeString(text)
	if err != nil || len(key) != chacha20poly1305.KeySize {
		return nil, fmt.Errorf("%w: key %s is damaged", ErrKeychain, id)
	}
	return &keyFile{key: key, tag: tagKeychain, keyID: id}, nil
}

// DeleteKeychainKey removes the key id from the OS keychain.
func DeleteKeychainKey(id string) error {
	if !keychain.available() {
		return ErrUnavailable
	}
	err := withTimeout(func() error { return keychain.del(KeychainService, id) })
	if err != nil && !errors.Is(err, errKeychainNotFound) {
		return fmt.Errorf("%w: delete key %s: %v", ErrKeychain, id, err)
	}
	return nil
}
