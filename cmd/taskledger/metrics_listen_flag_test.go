package main

import (
	"net"
	"strings"
	"testing"
)

// A --metrics-listen address that cannot be bound is refused at start.
func TestServeRefusesABusyMetricsAddress(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	r := reviewCLI("serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--metrics-listen", busy.Addr().String())
	if r.code != 1 || !strings.Contains(r.stderr, "--metrics-listen") {
		t.Fatalf("serve with a busy --metrics-listen: exit %d %q", r.code, r.stderr)
	}
}
