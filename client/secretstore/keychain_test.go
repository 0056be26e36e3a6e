package secretstore

import (
	"bytes"
	"errors"
	"sync"
	"testing"
)

// fakeKeychain is an in-memory OS keychain.
type fakeKeychain struct {
	mu    sync.Mutex
	up    bool
	items map[string]string
}

func (f *fakeKeychain) available() bool { return f.up }

func (f *fakeKeychain) set(service, account, secret string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.items[service+"|"+account] = secret
	return nil
}

func (f *fakeKeychain) get(service, account string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.items[service+"|"+account]
	if !ok {
		return "", errKeychainNotFound
	}
	return s, nil
}

func (f *fakeKeychain) del(service, account string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.items[service+"|"+account]; !ok {
		return errKeychainNotFound
	}
	delete(f.items, service+"|"+account)
	return nil
}

// useFakeKeychain replaces the OS keychain for one test.
func useFakeKeychain(t *testing.T, up bool) *fakeKeychain {
	t.Helper()
	f := &fakeKeychain{up: up, items: map[string]string{}}
	old := keychain
	keychain = f
	t.Cleanup(func() { keychain = old })
	return f
}

// With a reachable keychain and no key file, enrollment keeps a fresh key
// in the keychain; the sealed value names the keychain source, never holds
// the key, and opens only with that key.
func TestEnrollmentUsesKeychain(t *testing.T) {
	f := useFakeKeychain(t, true)
	s, err := ForEnrollment("")
	if err != nil {
		t.Fatal(err)
	}
	if dp, derr := DPAPI(); derr == nil {
		if s.Kind() != dp.Kind() {
			t.Fatalf("kind %s, want DPAPI first", s.Kind())
		}
		return
	}
	if s.Kind() != KindKeychain {
		t.Fatalf("kind %s", s.Kind())
	}
	id := s.(interface{ KeyID() string }).KeyID()
	text, ok := f.items[KeychainService+"|"+id]
	if !ok || id == "" {
		t.Fatalf("no keychain entry for %q: %v", id, f.items)
	}
	sealed, err := s.Seal([]byte("tldev_secret"), []byte("aad"))
	if err != nil {
		t.Fatal(err)
	}
	if sealed[0] != formatV1 || sealed[1] != tagKeychain || bytes.Contains(sealed, []byte("tldev_secret")) ||
		bytes.Contains(sealed, []byte(text)) {
		t.Fatalf("sealed value %x", sealed)
	}
	again, err := Open(KindKeychain, id)
	if err != nil {
		t.Fatal(err)
	}
	pt, err := again.Open(sealed, []byte("aad"))
	if err != nil || string(pt) != "tldev_secret" {
		t.Fatalf("%q %v", pt, err)
	}
	if _, err := again.Open(sealed, []byte("other")); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("other aad: %v", err)
	}
	// A key file's sealer does not open a keychain-sealed value.
	kf, err := CreateKeyFile(t.TempDir() + "/k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kf.Open(sealed, []byte("aad")); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("key file opened a keychain value: %v", err)
	}
}

// A missing, damaged or unreachable keychain key is a clear error.
func TestKeychainKeyErrors(t *testing.T) {
	f := useFakeKeychain(t, true)
	s, err := CreateKeychainKey()
	if err != nil {
		t.Fatal(err)
	}
	id := s.(interface{ KeyID() string }).KeyID()
	if _, err := OpenKeychainKey(""); !errors.Is(err, ErrKeychain) {
		t.Fatalf("no id: %v", err)
	}
	f.items[KeychainService+"|"+id] = "not base64 !"
	if _, err := OpenKeychainKey(id); !errors.Is(err, ErrKeychain) {
		t.Fatalf("damaged: %v", err)
	}
	if err := DeleteKeychainKey(id); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenKeychainKey(id); !errors.Is(err, ErrKeychain) {
		t.Fatalf("deleted: %v", err)
	}
	f.up = false
	if _, err := OpenKeychainKey(id); !errors.Is(err, ErrKeychain) {
		t.Fatalf("unreachable: %v", err)
	}
	if _, err := CreateKeychainKey(); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("create while unreachable: %v", err)
	}
}
