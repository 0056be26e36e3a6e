//go:build windows

package secretstore

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/windows"
)

// dpapi protects secrets with CryptProtectData for the current user.
type dpapi struct{}

// DPAPI returns the Windows DPAPI sealer (current user scope).
func DPAPI() (Sealer, error) { return dpapi{}, nil }

func (dpapi) Kind() string { return KindDPAPI }

func blob(b []byte) *windows.DataBlob {
	if len(b) == 0 {
		return &windows.DataBlob{}
	}
	return &windows.DataBlob{Size: uint32(len(b)), Data: &b[0]}
}

func takeBlob(out *windows.DataBlob) []byte {
	defer windows.LocalFree(windows.Handle(unsafe.Pointer(out.Data)))
	return append([]byte(nil), unsafe.Slice(out.Data, out.Size)...)
}

func (dpapi) Seal(plaintext, aad []byte) ([]byte, error) {
	var out windows.DataBlob
	err := windows.CryptProtectData(blob(plaintext), nil, blob(aad), 0, nil, windows.CRYPTPROTECT_UI_FORBIDDEN, &out)
	if err != nil {
		return nil, fmt.Errorf("secretstore: DPAPI protect: %w", err)
	}
	return append([]byte{formatV1, tagDPAPI}, takeBlob(&out)...), nil
}

func (dpapi) Open(sealed, aad []byte) ([]byte, error) {
	body, err := checkHeader(sealed, tagDPAPI)
	if err != nil {
		return nil, err
	}
	if len(body) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrDecrypt)
	}
	var out windows.DataBlob
	if err := windows.CryptUnprotectData(blob(body), nil, blob(aad), 0, nil, windows.CRYPTPROTECT_UI_FORBIDDEN, &out); err != nil {
		return nil, fmt.Errorf("%w: DPAPI", ErrDecrypt)
	}
	return takeBlob(&out), nil
}
