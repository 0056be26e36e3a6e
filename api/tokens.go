package api

import (
	"crypto/rand"
	"encoding/base64"
)

// Token prefixes tell the two credential kinds apart at a glance.
const (
	DeviceTokenPrefix = "tldev_"
	AdminTokenPrefix  = "tladm_"
)

func newToken(prefix string) (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// NewDeviceToken returns a new device bearer token (256 bits).
func NewDeviceToken() (string, error) { return newToken(DeviceTokenPrefix) }

// NewAdminToken returns a new admin bearer token (256 bits).
func NewAdminToken() (string, error) { return newToken(AdminTokenPrefix) }
