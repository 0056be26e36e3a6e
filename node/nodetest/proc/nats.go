package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"taskledger/ledger/jetstream/jstest"
)

// Real nats-server processes: the server of the module's own dependency
// (github.com/nats-io/nats-server/v2, the version go.mod names), built once
// per test process beside the taskledger binary, so a test kills and
// restarts servers as an operator's machine would lose them.

var (
	natsOnce sync.Once
	natsPath string
	natsErr  error
)

// NATSServer returns the path of a nats-server binary, building it on
// first use.
func NATSServer(t testing.TB) string {
	t.Helper()
	natsOnce.Do(func() {
		dir := filepath.Join(os.TempDir(), binRoot, strconv.Itoa(os.Getpid()))
		if natsErr = os.MkdirAll(dir, 0o755); natsErr != nil {
			return
		}
		natsPath = filepath.Join(dir, "nats-server")
		natsErr = goBuild("build", "-o", natsPath, "github.com/nats-io/nats-server/v2")
	})
	if natsErr != nil {
		t.Fatalf("build nats-server: %v", natsErr)
	}
	return natsPath
}

// NATS is one nats-server process of a NATSCluster; it keeps its ports
// and store directory across Kill and Start.
type NATS struct {
	Name        string
	ClientPort  int
	clusterPort int
	store       string
	routes      string
	bin         string
	P           *Proc
}

// URL is the server's client URL.
func (s *NATS) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.ClientPort) }

// Start starts (or restarts) the server and waits until it accepts
// clients; its JetStream state is whatever its store directory holds.
func (s *NATS) Start(t testing.TB) {
	t.Helper()
	s.P = Start(t, nil, s.bin, "--name", s.Name, "-a", "127.0.0.1", "-p", strconv.Itoa(s.ClientPort),
		"--js", "--sd", s.store, "--cluster_name", "tl",
		"--cluster", fmt.Sprintf("nats://127.0.0.1:%d", s.clusterPort), "--routes", s.routes)
	s.P.WaitLine(t, 0, "Server is ready")
}

// Kill stops the server with SIGKILL (nothing handed over) and waits for
// its exit.
func (s *NATS) Kill(t testing.TB) {
	t.Helper()
	if s.P != nil && !s.P.Exited() {
		s.P.Signal(syscall.SIGKILL)
		s.P.Wait(t)
	}
}

// NATSCluster starts n nats-server processes with JetStream, routed to
// each other on loopback; every one is stopped when the test ends.
func NATSCluster(t testing.TB, n int) []*NATS {
	t.Helper()
	bin := NATSServer(t)
	ports := jstest.FreePorts(t, 2*n)
	var routes []string
	for i := 0; i < n; i++ {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[n+i]))
	}
	var out []*NATS
	for i := 0; i < n; i++ {
		out = append(out, &NATS{Name: fmt.Sprintf("n%d", i+1), ClientPort: ports[i], clusterPort: ports[n+i],
			store: t.TempDir(), routes: strings.Join(routes, ","), bin: bin})
	}
	var wg sync.WaitGroup
	for _, s := range out {
		wg.Add(1)
		go func() { // together: a server waits for its routes before it is ready
			defer wg.Done()
			s.Start(t)
		}()
	}
	wg.Wait()
	return out
}

// NATSURLs is every server's client URL, comma-separated.
func NATSURLs(servers []*NATS) string {
	var us []string
	for _, s := range servers {
		us = append(us, s.URL())
	}
	return strings.Join(us, ",")
}
