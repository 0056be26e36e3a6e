package agent

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// ErrCAFile is a --ca-file that cannot be used.
var ErrCAFile = errors.New("agent: --ca-file holds no usable PEM certificate")

// loadCAFile reads the PEM certificates of a private certificate
// authority; they replace the system roots for the server's certificate.
func loadCAFile(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCAFile, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: %s", ErrCAFile, path)
	}
	return pool, nil
}
