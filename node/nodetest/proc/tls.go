package proc

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCA is a private certificate authority of a test, with files on disk.
type TestCA struct {
	Dir    string
	CAFile string // the CA certificate (PEM)
	Pool   *x509.CertPool
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	serial int64
}

// NewTestCA creates a CA in a temporary directory.
func NewTestCA(t testing.TB) *TestCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now() //tl:wallclock certificate validity
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "taskledger test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &TestCA{Dir: t.TempDir(), Pool: x509.NewCertPool(), cert: cert, key: key, serial: 1}
	ca.Pool.AddCert(cert)
	ca.CAFile = filepath.Join(ca.Dir, "ca.pem")
	writePEM(t, ca.CAFile, "CERTIFICATE", der)
	return ca
}

// Issue writes a server certificate for 127.0.0.1, ::1 and localhost to
// certFile and keyFile (replacing them) and returns its serial number.
func (ca *TestCA) Issue(t testing.TB, certFile, keyFile string) int64 {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca.serial++
	now := time.Now() //tl:wallclock certificate validity
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(ca.serial), Subject: pkix.Name{CommonName: "taskledger test server"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, keyFile, "EC PRIVATE KEY", kder)
	writePEM(t, certFile, "CERTIFICATE", der)
	return ca.serial
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// StartServerTLS starts `taskledger serve --clock=manual` over HTTPS with
// certFile and keyFile; the admin client trusts ca.
func StartServerTLS(t testing.TB, bin string, ca *TestCA, certFile, keyFile string, args ...string) *Server {
	t.Helper()
	data := t.TempDir()
	p := Start(t, nil, bin, append([]string{"serve", "--data", data, "--listen", "127.0.0.1:0", "--clock=manual",
		"--tls-cert", certFile, "--tls-key", keyFile}, args...)...)
	line, _ := p.WaitLine(t, 0, "listening on")
	addr := strings.TrimSpace(line[strings.Index(line, "listening on")+len("listening on"):])
	tok, err := os.ReadFile(filepath.Join(data, "initial-admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12}}
	s := &Server{URL: "https://" + addr, Admin: strings.TrimSpace(string(tok)), Data: data, Proc: p,
		hc: &http.Client{Transport: tr}}
	t.Cleanup(func() {
		p.Signal(syscall.SIGTERM)
		p.Wait(t)
		s.hc.CloseIdleConnections()
	})
	return s
}

// CloseIdle closes the admin client's idle connections (the next request
// makes a new TLS handshake).
func (s *Server) CloseIdle() { s.hc.CloseIdleConnections() }

// Lines returns how many stderr lines the process wrote so far (a from
// for WaitLine that skips them).
func (p *Proc) Lines() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.lines)
}
