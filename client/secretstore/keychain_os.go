//go:build linux || darwin

package secretstore

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"

	"github.com/godbus/dbus/v5"
	"github.com/zalando/go-keyring"
)

// keychainUsed is set once the keychain was called (on Linux: the shared
// D-Bus session connection may be open).
var keychainUsed atomic.Bool

// CloseKeychain closes the D-Bus session connection the Secret Service
// calls opened (it is shared by the process and stays open otherwise; the
// next call reconnects). For tests that check for leaked goroutines and
// embedders that want it gone; a no-op when nothing was called, and on
// macOS.
func CloseKeychain() {
	if runtime.GOOS != "linux" || !keychainUsed.Load() {
		return
	}
	if c, err := dbus.SessionBus(); err == nil {
		_ = c.Close()
	}
}

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
	keychainUsed.Store(true)
	return keyring.Set(service, account, secret)
}

func (osKeychain) get(service, account string) (string, error) {
	keychainUsed.Store(true)
	s, err := keyring.Get(service, account)
	if errors.Is(err, keyring.ErrNotFound) {
		return "", errKeychainNotFound
	}
	return s, err
}

func (osKeychain) del(service, account string) error {
	keychainUsed.Store(true)
	err := keyring.Delete(service, account)
	if errors.Is(err, keyring.ErrNotFound) {
		return errKeychainNotFound
	}
	return err
}
