package main

import (
	"crypto/tls"
	"fmt"
	"log"
	"net"
	"net/http"
	"sync"

	"github.com/rs/zerolog"
	"golang.org/x/net/netutil"

	"taskledger/api"
)

// certReloader holds the serving certificate and reloads it from its files
// (SIGHUP); a failed reload keeps the certificate in use.
type certReloader struct {
	certFile, keyFile string
	mu                sync.RWMutex
	cert              *tls.Certificate
}

func newCertReloader(certFile, keyFile string) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile}
	if err := r.reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// reload reads the certificate and key again.
func (r *certReloader) reload() error {
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		// The error of crypto/tls names the file's problem, never the key.
		return fmt.Errorf("TLS certificate %s / key %s: %w", r.certFile, r.keyFile, err)
	}
	r.mu.Lock()
	r.cert = &c
	r.mu.Unlock()
	return nil
}

func (r *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.cert, nil
}

// tlsConfig is TLS 1.2 and later with Go's default cipher suites.
func (r *certReloader) tlsConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.get, NextProtos: []string{"h2", "http/1.1"}}
}

// listener opens the listen address with the connection cap, and TLS
// when configured (certs is then the certificate holder).
func (nc netConfig) listener(addr string) (net.Listener, *certReloader, error) {
	var certs *certReloader
	if nc.tlsCert != "" {
		var err error
		if certs, err = newCertReloader(nc.tlsCert, nc.tlsKey); err != nil {
			return nil, nil, err
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	ln = netutil.LimitListener(ln, nc.maxConnections)
	if certs != nil {
		ln = tls.NewListener(ln, certs.tlsConfig())
	}
	return ln, certs, nil
}

// httpServer is the server with the configured timeouts and header limit.
func (nc netConfig) httpServer(h http.Handler, logger zerolog.Logger) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: nc.readHeaderTimeout, ReadTimeout: nc.readTimeout,
		WriteTimeout: nc.writeTimeout, IdleTimeout: nc.idleTimeout, MaxHeaderBytes: nc.maxHeaderBytes,
		ErrorLog: zerologStd(logger)}
}

// limits are the api's rate limits.
func (nc netConfig) limits() api.Limits {
	return api.Limits{DeviceRate: nc.deviceRate, DeviceBurst: nc.deviceBurst, AddressRate: nc.addressRate,
		AddressBurst: nc.addressBurst, DeviceUploadInflight: nc.deviceUploadInflight}
}

// zerologStd routes the http.Server's own messages (TLS handshake errors,
// for example) into the JSON log.
func zerologStd(logger zerolog.Logger) *log.Logger {
	return log.New(logger.With().Str("component", "http").Logger(), "", 0)
}
