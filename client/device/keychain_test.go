//go:build linux

package device

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"

	"taskledger/client/localstate"
	"taskledger/client/secretstore"
)

// Enrollment without a key file, where the Secret Service answers, keeps
// the key in it: the state records its id (no key file, no token in
// clear), Open decrypts with it, re-enrolling keeps it, and a key removed
// from the keychain stops Open with a clear error. It runs only with
// TASKLEDGER_TEST_SECRET_SERVICE=1 (CI sets it inside dbus-run-session),
// and then fails when no Secret Service answers.
func TestEnrollKeepsKeyInSecretService(t *testing.T) {
	if os.Getenv("TASKLEDGER_TEST_SECRET_SERVICE") != "1" {
		// Never write into a developer's own keyring unasked.
		t.Skip("set TASKLEDGER_TEST_SECRET_SERVICE=1 (with a Secret Service running, e.g. in dbus-run-session) to run this test")
	}
	if os.Getenv("DBUS_SESSION_BUS_ADDRESS") == "" {
		t.Fatal("TASKLEDGER_TEST_SECRET_SERVICE=1 but no session bus is named (DBUS_SESSION_BUS_ADDRESS)")
	}
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	token := "tldev_" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	tf := filepath.Join(dir, "token")
	if err := os.WriteFile(tf, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := EnrollOptions{StateDir: state, ServerURL: "https://tl.example", DeviceID: uuid.NewString(), TokenFile: tf}
	if err := Enroll(opts); err != nil {
		t.Fatalf("enroll: %v", err)
	}
	store, st, err := OpenStore(state)
	if err != nil {
		t.Fatal(err)
	}
	id := *st.Identity
	store.Close()
	t.Cleanup(func() {
		_ = secretstore.DeleteKeychainKey(id.KeyID)
		secretstore.CloseKeychain() // the shared D-Bus connection (goleak)
	})
	if id.KeySource != secretstore.KindKeychain || id.KeyID == "" || id.KeyFile != "" {
		t.Fatalf("identity key source %q id %q file %q", id.KeySource, id.KeyID, id.KeyFile)
	}
	raw, err := os.ReadFile(filepath.Join(state, localstate.FileName))
	if err != nil || bytes.Contains(raw, []byte(token)) {
		t.Fatalf("the token is in the state file in clear (%v)", err)
	}
	d, err := Open(Options{StateDir: state})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	d.Close()
	if err := Enroll(opts); err != nil {
		t.Fatalf("enroll again: %v", err)
	}
	store, st, _ = OpenStore(state)
	again := st.Identity.KeyID
	store.Close()
	if again != id.KeyID {
		t.Fatalf("re-enrollment changed the key: %s → %s", id.KeyID, again)
	}
	if err := secretstore.DeleteKeychainKey(id.KeyID); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{StateDir: state}); !errors.Is(err, secretstore.ErrKeychain) {
		t.Fatalf("open without the key: %v", err)
	}
}
