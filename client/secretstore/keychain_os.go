//go:build linux || darwin

package secretstore

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"

	"github.com/zalando/go-keyring"
)

// osKeychain is github.com/zalando/go-keyring: the Secret Service over
// D-Bus (GNOME Keyring, KWallet) on Linux, /usr/bin/security on macOS.
type osKeychain struct{}

// available: macOS always has a Keychain; on Linux a session bus must be
// named (DBUS_SESSION_BUS_ADDRESS or $XDG_RUNTIME_DIR/bus), so no D-Bus
// daemon is ever auto-launched.
func (osKeychain) available() bool {
	if runtime.GOOS == "darwin" {
		return true
	}
	if os.Getenv("DBUS_SESSION_BUS_ADDRESS") != "" {
		return true
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "bus")); err == nil {
			return true
		}
	}
	return false
}

func (osKeychain) set(service, account, secret string) error {
	return keyring.Set(service, account, secret)
}

func (osKeychain) get(service, account string) (string, error) {
	s, err := keyring.Get(service, account)
	if errors.Is(err, keyring.ErrNotFound) {
		return "", errKeychainNotFound
	}
	return s, err
}

func (osKeychain) del(service, account string) error {
	err := keyring.Delete(service, account)
	if errors.Is(err, keyring.ErrNotFound) {
		return errKeychainNotFound
	}
	return err
}
