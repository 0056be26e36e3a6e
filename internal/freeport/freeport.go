// Package freeport picks loopback ports for servers a test or a benchmark
// starts as separate processes, which must be told their ports before
// they bind them.
//
// A port is free when it is picked, not necessarily when the server binds
// it a moment later. A port the kernel hands out for listen(":0") comes
// from its ephemeral range, which every outgoing connection on the
// machine also draws its source port from, so such a port was sometimes
// taken by then ("address already in use"). Ports are drawn at random
// below that range instead (from 10000), where only ports that programs
// name themselves land, and each is checked by binding it once.
package freeport

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"os"
)

// Low is the lowest port Pick draws.
const Low = 10000

// Pick returns n distinct loopback ports, free when picked.
func Pick(n int) ([]int, error) { return pick(n, EphemeralLow(), bindOnce) }

// pick draws n ports below high, each checked with bind (which returns
// the port it bound: the kernel's pick for 0).
func pick(n, high int, bind func(port int) (int, error)) ([]int, error) {
	var ports []int
	seen := map[int]bool{}
	for tries := 0; len(ports) < n; tries++ {
		if tries > 100*n {
			return nil, fmt.Errorf("freeport: no %d free loopback ports from %d to %d", n, Low, high-1)
		}
		port := 0 // the kernel's pick, when the range below its own is too small
		if high-Low >= 1000 {
			port = Low + randN(high-Low)
		}
		if port != 0 && seen[port] {
			continue
		}
		port, err := bind(port)
		if err != nil {
			continue
		}
		if !seen[port] {
			seen[port] = true
			ports = append(ports, port)
		}
	}
	return ports, nil
}

// bindOnce binds a loopback port and lets it go.
func bindOnce(port int) (int, error) {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// EphemeralLow is the first port of the kernel's ephemeral range (Linux;
// 32768, the usual value, when it cannot be read).
func EphemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil || lo <= 0 {
		return 32768
	}
	return lo
}

// randN is a random number in [0, n) (crypto/rand: the module keeps
// math/rand out of what it builds; a port needs no more than this).
func randN(n int) int {
	var b [4]byte
	rand.Read(b[:]) // never fails (Go 1.24+)
	return int(binary.LittleEndian.Uint32(b[:]) % uint32(n))
}
