//go:build !windows

package secretstore

// DPAPI is only available on Windows.
func DPAPI() (Sealer, error) { return nil, ErrUnavailable }
