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

func (g *gatedFinished) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed, g.entered, g.open = true, make(chan struct{}), make(chan struct{})
}

func (g *gatedFinished) ReadModelScan(bucket string, prefix, from []byte, reverse bool, fn func(k, v []byte) (bool, error)) error {
	g.mu.Lock()
	armed, entered, open := g.armed, g.entered, g.open
	g.armed = false
	g.mu.Unlock()
	if armed {
		close(entered)
		<-open
	}
	return g.FinishedStore.ReadModelScan(bucket, prefix, from, reverse, fn)
}

// listWhile reads a page of the task list while act runs: the page's read
// of the disk waits until act is done, and act must not wait for it.
func listWhile(t *testing.T, n *nodetest.Node, g *gatedFinished, query string, act func()) []map[string]any {
	t.Helper()
	g.arm()
	page := make(chan *nodetest.Resp, 1)
	go func() { page <- n.Try("GET", nodetest.AdminPath+"/tasks?"+query, n.AdminToken, nil, nil) }()
	<-g.entered // the list is reading the disk, and stays there
	done := make(chan struct{})
	go func() { defer close(done); act() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		close(g.open)
		t.Fatal("a command waited for a list's read of the disk")
	}
	close(g.open)
	r := <-page
	nodetest.Must(t, r, http.StatusOK)
	return listOf(r)
}

func idsOf(tasks []map[string]any) []string {
	var ids []string
	for _, task := range tasks {
		ids = append(ids, nodetest.Str(task, "id"))
	}
	return ids
}

// TestListReadsTheDiskWithoutHoldingUpWrites: a page of the task list
// reads the settled tasks from the read model on disk after the engine's
// lock; while that read waits (a cold disk under years of history),
// commands still commit, and a task that ended meanwhile is listed once:
// as the lock saw it when it was live then.
func TestListReadsTheDiskWithoutHoldingUpWrites(t *testing.T) {
	n := nodetest.Start(t)
	devs := []*nodetest.Device{n.ReadyDevice(t), n.ReadyDevice(t), n.ReadyDevice(t)}
	old := n.StartTask(t, devs[0], map[string]any{"n": 0})
	nodetest.Must(t, old.Complete(map[string]any{"ok": true}), http.StatusOK) // settled: on disk
	running := n.StartTask(t, devs[1], map[string]any{"n": 1})
	other := n.StartTask(t, devs[2], map[string]any{"n": 2})
	fresh := n.CreateTask(map[string]any{"n": 3})

	g := &gatedFinished{FinishedStore: n.Store}
	if err := n.Engine.Exclusive(func(s *projections.State) error { s.UseFinished(g); return nil }); err != nil {
		t.Fatal(err)
	}
	var newest string
	page := listWhile(t, n, g, "state=SUCCEEDED&limit=10", func() {
		nodetest.Must(t, running.Complete(map[string]any{"ok": true}), http.StatusOK)
		newest = n.CreateTask(map[string]any{"n": 4})
	})
	// The settled half is read as committed when it is read: the task
	// that completed meanwhile may be there too, once.
	if got := idsOf(page); !slices.Equal(got, []string{old.TaskID}) && !slices.Equal(got, []string{running.TaskID, old.TaskID}) {
		t.Fatalf("SUCCEEDED page read while a task completed: %v, want %s (and perhaps %s before it)", got, old.TaskID, running.TaskID)
	}
	page = listWhile(t, n, g, "limit=10", func() {
		nodetest.Must(t, other.Complete(map[string]any{"ok": true}), http.StatusOK)
	})
	if got, want := idsOf(page), []string{newest, fresh, other.TaskID, running.TaskID, old.TaskID}; !slices.Equal(got, want) {
		t.Fatalf("page read while a task completed: %v, want %v", got, want)
	}
	if st := nodetest.Str(page[2], "state"); st != "RUNNING" {
		t.Fatalf("the task that completed while the page was read is listed as %s, want RUNNING as the lock saw it", st)
	}
	after := listedTasks(t, n, "state=SUCCEEDED&limit=10", 0)
	if got, want := idsOf(after), []string{other.TaskID, running.TaskID, old.TaskID}; !slices.Equal(got, want) {
		t.Fatalf("SUCCEEDED page afterwards: %v, want %v", got, want)
	}
}

func listOf(r *nodetest.Resp) []map[string]any {
	var tasks []map[string]any
	for _, task := range r.JSON()["tasks"].([]any) {
		tasks = append(tasks, task.(map[string]any))
	}
	return tasks
}
