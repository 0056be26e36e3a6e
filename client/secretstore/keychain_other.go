//go:build !linux && !darwin

package secretstore

// osKeychain: no OS keychain is used on this system (Windows uses DPAPI).
type osKeychain struct{}

func (osKeychain) available() bool                    { return false }
func (osKeychain) set(string, string, string) error   { return ErrUnavailable }
func (osKeychain) get(string, string) (string, error) { return "", ErrUnavailable }
func (osKeychain) del(string, string) error           { return ErrUnavailable }

// CloseKeychain has nothing to close here.
func CloseKeychain() {}
