package client

import (
	"context"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"
)

// A configured HTTPS_PROXY (and HTTP_PROXY, ALL_PROXY) is ignored: the
// client goes straight to the server, and the proxy sees no connection.
func TestHTTPSProxyIgnored(t *testing.T) {
	var proxyConns atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxyConns.Add(1)
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer proxy.Close()
	for _, k := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY"} {
		t.Setenv(k, proxy.URL)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")

	st := &stub{status: 200, header: jsonCT, body: goodClaim}
	srv := httptest.NewTLSServer(st)
	defer srv.Close()
	// The test certificate is valid for example.com: reach the TLS server
	// under that (non-loopback) name, so a proxy-honoring client would have
	// sent a CONNECT to the proxy.
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	base := "https://example.com:" + port
	u, _ := url.Parse(base)
	if p, _ := http.ProxyFromEnvironment(&http.Request{URL: u}); p == nil {
		t.Fatal("test setup: the environment would not proxy this URL")
	}
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	addr := srv.Listener.Addr().String()
	c, err := New(Config{BaseURL: base, DeviceID: testDevice, Token: testToken, RootCAs: pool, ReadTimeout: 2 * time.Second,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdle()
	res, err := c.Claim(context.Background(), claimCall())
	if err != nil || res.Claim == nil {
		t.Fatalf("%+v %v", res, err)
	}
	if proxyConns.Load() != 0 || st.hits.Load() != 1 {
		t.Fatalf("proxy saw %d requests, server %d", proxyConns.Load(), st.hits.Load())
	}
}

// Certificate verification is always on: an unknown CA fails (no answer
// was received, so the outcome is unknown) and the handler is never run.
func TestTLSVerificationOn(t *testing.T) {
	st := &stub{status: 200, header: jsonCT, body: goodClaim}
	srv := httptest.NewTLSServer(st)
	defer srv.Close()
	srv.Config.ErrorLog = nil
	c, err := New(Config{BaseURL: srv.URL, DeviceID: testDevice, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdle()
	if _, err := c.Claim(context.Background(), claimCall()); err == nil || st.hits.Load() != 0 {
		t.Fatalf("untrusted certificate accepted: %v", err)
	}
}
