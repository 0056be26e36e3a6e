package api_test

import (
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"taskledger/node/nodetest"
	"taskledger/projections"
)

// gatedFinished is the read model with a gate on its scans: once armed,
// a scan says it entered and waits until the gate opens.
type gatedFinished struct {
	projections.FinishedStore
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	open    chan struct{}
}

func (g *gatedFinished) ReadModelScan(bucket string, prefix, from []byte, reverse bool, fn func(k, v []byte) (bool, error)) error {
	g.mu.Lock()
	armed := g.armed
	g.armed = false
	g.mu.Unlock()
	if armed {
		close(g.entered)
		<-g.open
	}
	return g.FinishedStore.ReadModelScan(bucket, prefix, from, reverse, fn)
}

// TestListReadsTheDiskWithoutHoldingUpWrites: a page of the task list
// reads the settled tasks from the read model on disk; while that read
// waits (a cold disk under years of history), commands still commit — the
// read holds no lock the sequencer needs — and the page, once read, holds
// the live and the settled tasks in one order, each once.
func TestListReadsTheDiskWithoutHoldingUpWrites(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	old := n.StartTask(t, d, map[string]any{"n": 0})
	nodetest.Must(t, old.Complete(map[string]any{"ok": true}), http.StatusOK)
	for range 4 { // past the idempotency retention (72 h): the next event settles it
		n.Advance(24 * time.Hour)
	}
	fresh := n.CreateTask(map[string]any{"n": 1})
	if c := n.Admin("GET", "/tasks?state=SUCCEEDED", nil).JSON()["counts"]; c == nil {
		t.Fatal("no counts")
	}

	g := &gatedFinished{FinishedStore: n.Store, armed: true, entered: make(chan struct{}), open: make(chan struct{})}
	if err := n.Engine.Exclusive(func(s *projections.State) error { s.UseFinished(g); return nil }); err != nil {
		t.Fatal(err)
	}
	page := make(chan *nodetest.Resp, 1)
	go func() { page <- n.Try("GET", nodetest.AdminPath+"/tasks?limit=10", n.AdminToken, nil, nil) }()
	<-g.entered // the list is reading the disk, and stays there

	created := make(chan string, 1)
	go func() { created <- n.CreateTask(map[string]any{"n": 2}) }()
	var newest string
	select {
	case newest = <-created:
	case <-time.After(30 * time.Second):
		close(g.open)
		t.Fatal("a command waited for a list's read of the disk")
	}
	close(g.open)
	r := <-page
	nodetest.Must(t, r, http.StatusOK)
	var ids []string
	for _, task := range r.JSON()["tasks"].([]any) {
		ids = append(ids, nodetest.Str(task.(map[string]any), "id"))
	}
	// The page was read before the newest task was created; the settled
	// task comes from disk, after the live one created later.
	if want := []string{fresh, old.TaskID}; !slices.Equal(ids, want) {
		t.Fatalf("page %v, want %v (newest %s)", ids, want, newest)
	}
}
