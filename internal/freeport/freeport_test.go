package freeport

import (
	"fmt"
	"net"
	"testing"
)

// TestPortsAreDistinctBindableAndBelowTheEphemeralRange: the ports are
// all different, each can be bound, and none comes from the range the
// kernel draws outgoing connections' source ports from (where another
// test's connection could take it before a server binds it).
func TestPortsAreDistinctBindableAndBelowTheEphemeralRange(t *testing.T) {
	ports, err := Pick(64)
	if err != nil {
		t.Fatal(err)
	}
	high := EphemeralLow()
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d given twice", p)
		}
		seen[p] = true
		if high-Low >= 1000 && (p < Low || p >= high) {
			t.Errorf("port %d is not in [%d, %d)", p, Low, high)
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Errorf("port %d cannot be bound: %v", p, err)
			continue
		}
		l.Close()
	}
	if len(ports) != 64 {
		t.Fatalf("%d ports, want 64", len(ports))
	}
}
