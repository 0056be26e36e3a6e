// Package jstest starts embedded NATS JetStream servers for tests: one
// server, or a three-node cluster routed on loopback, each with its store
// in a temporary directory and shut down at cleanup. It is imported by
// tests and by the test helper node/nodetest/proc only
// (TestPackageBoundaries keeps the embedded server's own import inside this
// package; TestBinaryDoesNotLinkNATSServer keeps both out of the binary).
package jstest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"taskledger/internal/freeport"
)

// Server starts an embedded JetStream server on a loopback random port;
// syncAlways fsyncs every write (sync_interval: always).
func Server(t testing.TB, syncAlways bool) *server.Server {
	t.Helper()
	return ServerAt(t, server.RANDOM_PORT, syncAlways)
}

// ServerAt is Server on the given client port.
func ServerAt(t testing.TB, port int, syncAlways bool) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: t.TempDir(), SyncAlways: syncAlways,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatal("embedded NATS server did not start")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// FreePorts reserves n loopback ports (the cluster's routes must be known
// before the servers start): freeport.Pick, which draws them below the
// kernel's ephemeral range.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports, err := freeport.Pick(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

// Eventually polls cond until it holds or the bound passes (a cluster
// elects its leaders on its own schedule: there is no signal to wait on).
func Eventually(t testing.TB, bound time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("%s: not within %v: %v", what, bound, err)
		case <-tick.C:
		}
	}
}

// Cluster starts three embedded JetStream servers routed to each other on
// loopback, and waits until they have a meta leader with three peers.
func Cluster(t testing.TB) []*server.Server {
	t.Helper()
	return ClusterAt(t, nil)
}

// ClusterAt is Cluster with the servers' client ports given (nil: random
// ones), for a test that names the servers before they start.
func ClusterAt(t testing.TB, clientPorts []int) []*server.Server {
	t.Helper()
	ports := FreePorts(t, 3)
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	var servers []*server.Server
	for i, p := range ports {
		port := server.RANDOM_PORT
		if clientPorts != nil {
			port = clientPorts[i]
		}
		s, err := server.NewServer(&server.Options{
			ServerName: fmt.Sprintf("n%d", i+1), Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true,
			JetStream: true, StoreDir: t.TempDir(),
			Cluster: server.ClusterOpts{Name: "tl", Host: "127.0.0.1", Port: p},
			Routes:  server.RoutesFromStr(strings.Join(routes, ",")),
		})
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		t.Cleanup(func() {
			s.Shutdown()
			s.WaitForShutdown()
		})
		servers = append(servers, s)
	}
	for _, s := range servers {
		if !s.ReadyForConnections(10 * time.Second) {
			t.Fatal("embedded NATS server did not start")
		}
	}
	Eventually(t, 15*time.Second, "meta leader", func() error {
		for _, s := range servers {
			if s.JetStreamIsLeader() && len(s.JetStreamClusterPeers()) == 3 {
				return nil
			}
		}
		return errors.New("no JetStream meta leader with three peers")
	})
	return servers
}

// URLs is every server's client URL, comma-separated.
func URLs(servers []*server.Server) string {
	var us []string
	for _, s := range servers {
		us = append(us, s.ClientURL())
	}
	return strings.Join(us, ",")
}
