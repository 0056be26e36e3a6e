package freeport

import (
	"errors"
	"fmt"
	"net"
	"strings"
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

// TestPickFailsClearlyWhenNoPortCanBeBound: when every port drawn is taken,
// Pick gives up with an error naming the range instead of looping.
func TestPickFailsClearlyWhenNoPortCanBeBound(t *testing.T) {
	taken := func(int) (int, error) { return 0, errors.New("address already in use") }
	ports, err := pick(3, 32768, taken)
	if err == nil || ports != nil || !strings.Contains(err.Error(), "no 3 free loopback ports from 10000 to 32767") {
		t.Fatalf("pick with every port taken: %v, %v; want an error naming the range", ports, err)
	}
}
