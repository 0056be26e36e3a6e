package client

import (
	"errors"
	"testing"
)

func TestParseBaseURL(t *testing.T) {
	ok := map[string]string{
		"http://127.0.0.1:8080":        "http://127.0.0.1:8080",
		"http://127.0.0.1:8080/":       "http://127.0.0.1:8080",
		"http://[::1]:9000":            "http://[::1]:9000",
		"http://localhost:1":           "http://localhost:1",
		"https://ledger.example.com":   "https://ledger.example.com",
		"https://10.1.2.3:8443/prefix": "https://10.1.2.3:8443/prefix",
	}
	for in, want := range ok {
		u, err := ParseBaseURL(in)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if u.String() != want {
			t.Errorf("%s → %s, want %s", in, u, want)
		}
	}
	bad := []string{
		"http://example.com",           // plain http to a non-loopback host
		"http://10.0.0.1:8080",         // idem, an IP
		"http://127.0.0.2:8080",        // only 127.0.0.1 counts
		"http://localhost.evil.com",    // not localhost
		"https://user:pw@example.com",  // user info
		"http://user@127.0.0.1:8080",   // user info on loopback
		"http://127.0.0.1:8080@evil",   // user info disguised
		"https://example.com/?x=1",     // query
		"https://example.com/#frag",    // fragment
		"ftp://example.com",            // scheme
		"example.com",                  // no scheme
		"https://",                     // no host
		"https://example.com:80x",      // bad port
		"HTTP://example.com",           // still plain http
		"http://[fe80::1%25eth0]:8080", // zone, not loopback
	}
	for _, in := range bad {
		if _, err := ParseBaseURL(in); !errors.Is(err, ErrInvalidBaseURL) {
			t.Errorf("%s accepted (err %v)", in, err)
		}
	}
}

func TestNewRefusesBeforeConnecting(t *testing.T) {
	for _, u := range []string{"http://192.0.2.1:8080", "https://u:p@192.0.2.1"} {
		if _, err := New(Config{BaseURL: u, DeviceID: testDevice, Token: testToken}); !errors.Is(err, ErrInvalidBaseURL) {
			t.Fatalf("%s: %v", u, err)
		}
	}
	if _, err := New(Config{BaseURL: "http://127.0.0.1:1", DeviceID: "ABC", Token: testToken}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("bad device id: %v", err)
	}
	if _, err := New(Config{BaseURL: "http://127.0.0.1:1", DeviceID: testDevice, Token: "has space"}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("bad token: %v", err)
	}
}
