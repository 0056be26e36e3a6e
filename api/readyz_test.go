package api_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"

	"taskledger/api"
	"taskledger/commands"
	"taskledger/ledger"
	"taskledger/node"
	"taskledger/node/nodetest"
)

// mustNotReady asserts /readyz answers 503 with Retry-After and the JSON
// body {"status":"not_ready","reason":reason}.
func mustNotReady(t *testing.T, n *nodetest.Node, reason string) {
	t.Helper()
	r := n.Do("GET", "/readyz", "", nil, nil)
	var body map[string]string
	if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" ||
		json.Unmarshal(r.Body, &body) != nil || body["status"] != "not_ready" || body["reason"] != reason || len(body) != 2 {
		t.Fatalf("readyz: %d %q (Retry-After %q), want 503 not_ready with reason %q", r.Status, r.Body, r.Header.Get("Retry-After"), reason)
	}
}

// /readyz names a nearly full disk (free space below api.MinFreeBytes on
// the data directory's file system) and turns ready once there is room;
// the statfs failing is no reason (unknown is not full).
func TestReadyzNamesAFullDisk(t *testing.T) {
	var free atomic.Uint64
	free.Store(api.MinFreeBytes - 1)
	fail := atomic.Bool{}
	n := nodetest.Start(t, func(c *node.Config) {
		c.FreeSpace = func() (uint64, error) {
			if fail.Load() {
				return 0, errors.New("statfs: not supported")
			}
			return free.Load(), nil
		}
	})
	mustNotReady(t, n, api.NotReadyDiskFull)
	nodetest.Must(t, n.Do("GET", "/healthz", "", nil, nil), http.StatusOK)
	free.Store(api.MinFreeBytes)
	nodetest.Must(t, n.Do("GET", "/readyz", "", nil, nil), http.StatusOK)
	fail.Store(true)
	nodetest.Must(t, n.Do("GET", "/readyz", "", nil, nil), http.StatusOK)
}

// /readyz names a graceful shutdown; /healthz stays 200.
func TestReadyzNamesShutdown(t *testing.T) {
	n := nodetest.Start(t)
	nodetest.Must(t, n.Do("GET", "/readyz", "", nil, nil), http.StatusOK)
	n.API.Stopping()
	mustNotReady(t, n, api.NotReadyShuttingDown)
	nodetest.Must(t, n.Do("GET", "/healthz", "", nil, nil), http.StatusOK)
}

// A node whose log commit failed with an I/O error is fenced: /readyz names
// it, every API route answers 503 with Retry-After, /healthz stays 200
// (the same through the engine's Log, without failpoints).
func TestReadyzNamesAFencedNode(t *testing.T) {
	var broken atomic.Bool
	n := nodetest.Start(t, func(c *node.Config) {
		c.WrapLog = func(l commands.Log) commands.Log {
			return logFunc(func(b *ledger.Batch) error {
				if broken.Load() {
					return fmt.Errorf("%w: fdatasync: %w", ledger.ErrCommitIO, syscall.EIO)
				}
				return l.Append(b)
			})
		}
	})
	id := n.CreateTask(nil)
	broken.Store(true)
	mustUnavailable(t, "the failed command", n.Do("POST", nodetest.AdminPath+"/tasks", n.AdminToken,
		map[string]any{"payload": map[string]any{"n": 2}}, nil))
	mustNotReady(t, n, api.NotReadyFenced)
	mustUnavailable(t, "a read", n.Do("GET", nodetest.AdminPath+"/tasks/"+id, n.AdminToken, nil, nil))
	nodetest.Must(t, n.Do("GET", "/healthz", "", nil, nil), http.StatusOK)
}

// logFunc is a commands.Log of one function.
type logFunc func(b *ledger.Batch) error

func (f logFunc) Append(b *ledger.Batch) error { return f(b) }
