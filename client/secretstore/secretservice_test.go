//go:build linux

package secretstore

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

// requireSecretServiceEnv, set to 1 (CI does, inside dbus-run-session with
// gnome-keyring-daemon), runs TestSecretServiceRoundTrip and makes it fail
// when no Secret Service can be reached; unset, the test is skipped.
const requireSecretServiceEnv = "TASKLEDGER_TEST_SECRET_SERVICE"

// Through the real Secret Service over D-Bus: a key is stored, read back,
// a secret sealed with it opens with the key read again, and after the
// delete the key is gone.
func TestSecretServiceRoundTrip(t *testing.T) {
	kc := osKeychain{}
	if os.Getenv(requireSecretServiceEnv) != "1" {
		// Never write into a developer's own keyring unasked.
		t.Skipf("set %s=1 (with a Secret Service running, e.g. in dbus-run-session) to run this test", requireSecretServiceEnv)
	}
	if !kc.available() {
		t.Fatalf("%s=1 but no session bus is named (DBUS_SESSION_BUS_ADDRESS)", requireSecretServiceEnv)
	}
	s, err := CreateKeychainKey()
	if err != nil {
		t.Fatalf("store a key in the Secret Service: %v", err)
	}
	id := s.(interface{ KeyID() string }).KeyID()
	t.Cleanup(func() {
		_ = DeleteKeychainKey(id)
		CloseKeychain()
	})
	raw, err := kc.get(KeychainService, id)
	if err != nil || raw == "" {
		t.Fatalf("read back through D-Bus: %q %v", raw, err)
	}
	sealed, err := s.Seal([]byte("tldev_token"), []byte("aad"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte(raw)) {
		t.Fatal("the key is in the sealed value")
	}
	again, err := OpenKeychainKey(id)
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := again.Open(sealed, []byte("aad")); err != nil || string(pt) != "tldev_token" {
		t.Fatalf("%q %v", pt, err)
	}
	if err := DeleteKeychainKey(id); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.get(KeychainService, id); !errors.Is(err, errKeychainNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if _, err := OpenKeychainKey(id); !errors.Is(err, ErrKeychain) {
		t.Fatalf("open after delete: %v", err)
	}
}
