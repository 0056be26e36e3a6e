package node_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"

	"taskledger/commands"
	"taskledger/ledger"
	"taskledger/node"
	"taskledger/node/nodetest"
	"taskledger/projections"
)

// holdLog holds the next append that carries events until released, so a
// test can act while a batch is in flight; with fail set, that append
// then fails without writing.
type holdLog struct {
	inner   commands.Log
	hold    atomic.Bool
	fail    error
	entered chan struct{} // capacity 1: told each time an append is held
	release chan struct{}
}

func (h *holdLog) Append(b *ledger.Batch) error {
	if len(b.Events) > 0 && h.hold.CompareAndSwap(true, false) {
		h.entered <- struct{}{}
		<-h.release
		if h.fail != nil {
			return h.fail
		}
	}
	return h.inner.Append(b)
}

// TestGracefulShutdownFinishesBatchInFlight: shutdown (the serve command's
// sequence: API 503s, then Node.Close) lets the batch being committed
// finish and answers it; requests after shutdown began get 503 with
// Retry-After, and /readyz turns 503 while /healthz stays 200.
func TestGracefulShutdownFinishesBatchInFlight(t *testing.T) {
	hl := &holdLog{entered: make(chan struct{}, 1), release: make(chan struct{})}
	n := nodetest.Start(t, func(c *node.Config) {
		c.WrapLog = func(l commands.Log) commands.Log { hl.inner = l; return hl }
	})
	hl.hold.Store(true)

	type answer struct {
		status int
		id     string
		err    error
	}
	inflight := make(chan answer, 1)
	go func() {
		raw, _ := json.Marshal(map[string]any{"payload": map[string]any{"in": "flight"}})
		req, _ := http.NewRequest("POST", n.URL+"/api/v1/admin/tasks", bytes.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+n.AdminToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", nodetest.NewKey())
		res, err := n.HTTP.Do(req)
		if err != nil {
			inflight <- answer{err: err}
			return
		}
		defer res.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(res.Body).Decode(&m)
		id, _ := m["id"].(string)
		inflight <- answer{status: res.StatusCode, id: id}
	}()
	<-hl.entered // the batch is committing

	n.API.Stopping() // what serve does on SIGTERM, then Node.Close
	closed := make(chan error, 1)
	go func() { closed <- n.Node.Close() }()

	late := n.Do("POST", "/api/v1/admin/tasks", n.AdminToken, map[string]any{"payload": map[string]any{"too": "late"}}, nil)
	if late.Status != http.StatusServiceUnavailable || late.Header.Get("Retry-After") == "" {
		t.Fatalf("a request after shutdown began: %d, Retry-After %q", late.Status, late.Header.Get("Retry-After"))
	}
	if r := n.Do("GET", "/readyz", "", nil, nil); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("/readyz during shutdown: %d", r.Status)
	}
	if r := n.Do("GET", "/healthz", "", nil, nil); r.Status != http.StatusOK {
		t.Fatalf("/healthz during shutdown: %d", r.Status)
	}
	select {
	case a := <-inflight:
		t.Fatalf("the request in flight was answered before its commit finished: %+v", a)
	default:
	}

	close(hl.release)
	a := <-inflight
	if a.err != nil || a.status != http.StatusCreated || a.id == "" {
		t.Fatalf("the request in flight: %+v", a)
	}
	if err := <-closed; err != nil {
		t.Fatalf("close: %v", err)
	}
	if r := n.Do("POST", "/api/v1/admin/tasks", n.AdminToken, map[string]any{"payload": map[string]any{}}, nil); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("a request after shutdown: %d", r.Status)
	}
	// The acknowledged task is in the log (the cleanup verifies the rest).
	store, err := ledger.Open(n.Dir, ledger.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	st, err := projections.Rebuild(store, projections.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Tasks[a.id] == nil {
		t.Fatalf("task %s acknowledged during shutdown is not in the log", a.id)
	}
	if len(st.Tasks) != 1 {
		t.Fatalf("%d tasks in the log, want only the one in flight", len(st.Tasks))
	}
}
