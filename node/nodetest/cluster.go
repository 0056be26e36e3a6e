package nodetest

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"taskledger/commands"
	"taskledger/ledger/jetstream"
	"taskledger/node"
)

// StartCluster starts a node on the JetStream cluster at natsURL (stream
// and buckets prefixed name, R3) with the wall clock and the lease TTL
// given, served by an httptest server whose URL it advertises. Its
// AdminToken is read from dir when this node initialized the stream (set it
// from that node's otherwise). Close stops it without checking the log: a
// cluster test verifies the stream itself (node.VerifyBackend).
func StartCluster(t testing.TB, natsURL, name, dir string, ttl time.Duration, opts ...Option) *Node {
	t.Helper()
	var h atomic.Pointer[http.Handler]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := h.Load(); p != nil {
			(*p).ServeHTTP(w, r)
			return
		}
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	// A start waits for the cluster as `serve` does (its resources may not
	// answer yet on a loaded machine: "no responders"), not one attempt.
	log, err := jetstream.Open(jetstream.Config{URL: natsURL, Name: name, Replicas: 3, Timeout: 2 * time.Second,
		StartTimeout: 30 * time.Second})
	if err != nil {
		srv.Close()
		t.Fatalf("nodetest: open the stream: %v", err)
	}
	logger := zerolog.Nop()
	if os.Getenv("TASKLEDGER_TEST_CLUSTER_LOG") != "" { // the nodes' logs on stderr, to debug a cluster test
		logger = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).With().Timestamp().Logger()
	}
	cfg := node.Config{DataDir: dir, Commands: commands.DefaultConfig(), SnapshotEvery: 100000, Logger: logger}
	for _, o := range opts {
		o(&cfg)
	}
	n, err := node.OpenCluster(cfg, node.ClusterConfig{Log: log, Advertise: srv.URL, LeaseTTL: ttl})
	if err != nil {
		log.Close()
		srv.Close()
		t.Fatalf("nodetest: open cluster node: %v", err)
	}
	handler := n.Handler()
	h.Store(&handler)
	tok, _ := os.ReadFile(filepath.Join(dir, node.InitialTokenFile))
	tn := &Node{Node: n, T: t, Dir: dir, URL: srv.URL, AdminToken: strings.TrimSpace(string(tok)),
		HTTP: srv.Client(), server: srv}
	t.Cleanup(func() { tn.Close() })
	return tn
}

// Kill stops a cluster node as a crash would: its HTTP server and client
// connections drop, its NATS connection closes (nothing it has not
// published yet is appended) and its lease is left to expire.
func (n *Node) Kill(crash func(*node.Node)) {
	if n.closed {
		return
	}
	n.closed = true
	n.server.CloseClientConnections()
	crash(n.Node)
	n.server.Close() // waits for the requests the crash answered
}
