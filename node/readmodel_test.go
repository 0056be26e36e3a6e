package node_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"taskledger/commands"
	"taskledger/ledger"
	"taskledger/node"
	"taskledger/node/nodetest"
	"taskledger/projections"
)

// readModelTasks lists the tasks in the read model on disk by id (the
// node closed or not: bbolt reads are concurrent with the writer), each
// document keyed by its creation seq.
func readModelTasks(t *testing.T, store *ledger.Store) map[string]*projections.Task {
	t.Helper()
	out := map[string]*projections.Task{}
	err := store.ReadModelScan(projections.RMTasks, nil, nil, false, func(k, v []byte) (bool, error) {
		task, err := projections.DecodeFinishedTask(v)
		if err != nil {
			return false, err
		}
		if len(k) != 8 || binary.BigEndian.Uint64(k) != task.CreateSeq {
			return false, fmt.Errorf("task %s (creation seq %d) is filed under %x", task.ID, task.CreateSeq, k)
		}
		out[task.ID] = task
		return true, nil
	})
	if err != nil {
		t.Fatalf("read model: %v", err)
	}
	return out
}

// A finished task goes to the read model on disk in the commit of the
// event that ended it, and leaves memory; the document is the task as the
// projections held it. The cleanup compares the read model with a full
// replay's.
func TestFinishedTaskSettlesToDiskInTheCommitThatEndsIt(t *testing.T) {
	n := nodetest.Start(t)
	live := n.CreateTask(nil)
	if got := readModelTasks(t, n.Store); len(got) != 0 {
		t.Fatalf("read model holds %d tasks before any ended", len(got))
	}
	done := n.CreateTask(nil)
	nodetest.Must(t, n.Cancel(done), 200)
	got := readModelTasks(t, n.Store)
	if len(got) != 1 || got[done] == nil {
		t.Fatalf("read model holds %v, want only %s", got, done)
	}
	if got[done].State != projections.StateCanceled || got[live] != nil {
		t.Fatalf("read model task %s is %s", done, got[done].State)
	}
	n.Engine.Read(func(s *projections.State) {
		if s.Tasks[done] != nil || s.Tasks[live] == nil {
			t.Errorf("in memory: ended %v, live %v", s.Tasks[done] != nil, s.Tasks[live] != nil)
		}
	})
	if st := nodetest.Str(n.Task(done), "state"); st != string(projections.StateCanceled) {
		t.Fatalf("the ended task reads as %s", st)
	}
	head, _ := n.Store.ReadModelGet(projections.RMMeta, projections.RMHeadKey())
	if len(head) != 8 || binary.BigEndian.Uint64(head) != n.Head() {
		t.Fatalf("read model head %x, log head %d", head, n.Head())
	}
	// Index entries: the state index names it in its state.
	var ids []string
	_ = n.Store.ReadModelScan(projections.RMState, []byte("CANCELED\x00"), nil, true, func(k, v []byte) (bool, error) {
		ids = append(ids, string(v))
		return true, nil
	})
	if len(ids) != 1 || ids[0] != done {
		t.Fatalf("state index CANCELED: %v", ids)
	}
	// A restart keeps the read model (it is at the head) and writes on.
	n = n.Restart()
	nodetest.Must(t, n.Cancel(live), 200)
	if got := readModelTasks(t, n.Store); len(got) != 2 || got[live] == nil {
		t.Fatalf("after a restart the read model holds %d tasks", len(got))
	}
}

// readModelTombstones counts the expired keys' tombstones on disk.
func readModelTombstones(t *testing.T, store *ledger.Store) int {
	t.Helper()
	return len(bucketKeys(t, store, projections.RMTombs))
}

// A read model that is not the one of the loaded projections (another
// retention expires other keys; a file from before the read model had
// none) is rebuilt from them at start, in one transaction. Which tasks
// settled does not depend on the retention: every ended one.
func TestReadModelRebuiltAtStartWhenRetentionChanges(t *testing.T) {
	hour := nodetest.WithConfig(func(c *commands.Config) { c.IdempotencyRetention = time.Hour })
	n := nodetest.Start(t, hour)
	a := n.CreateTask(nil)
	nodetest.Must(t, n.Cancel(a), 200)
	n.Advance(2 * time.Hour)
	b := n.CreateTask(nil)
	nodetest.Must(t, n.Cancel(b), 200)
	n.Advance(30 * time.Minute)
	n.CreateTask(nil)
	expired := readModelTombstones(t, n.Store)
	if got := readModelTasks(t, n.Store); len(got) != 2 || got[a] == nil || got[b] == nil || expired == 0 {
		t.Fatalf("read model with 1h retention: %d tasks, %d tombstones", len(got), expired)
	}
	n = n.Restart(nodetest.WithConfig(func(c *commands.Config) { c.IdempotencyRetention = 20 * time.Minute }))
	if got, more := readModelTasks(t, n.Store), readModelTombstones(t, n.Store); len(got) != 2 || more <= expired {
		t.Fatalf("read model rebuilt with 20m retention: %d tasks, %d tombstones (%d with 1h)", len(got), more, expired)
	}
	n = n.Restart(nodetest.WithConfig(func(c *commands.Config) { c.IdempotencyRetention = 3 * time.Hour }))
	if got, none := readModelTasks(t, n.Store), readModelTombstones(t, n.Store); len(got) != 2 || none != 0 {
		t.Fatalf("read model rebuilt with 3h retention: %d tasks, %d tombstones", len(got), none)
	}
}

// verify compares the read model with a replay's key by key: a document
// changed on disk is a violation naming the bucket.
func TestVerifyRefusesAChangedReadModel(t *testing.T) {
	n := nodetest.Start(t, nodetest.WithConfig(func(c *commands.Config) { c.IdempotencyRetention = time.Hour }))
	id := n.CreateTask(nil)
	nodetest.Must(t, n.Cancel(id), 200)
	n.Advance(2 * time.Hour)
	n.CreateTask(nil)
	dir := n.Dir
	n.Close()
	cfg := projections.Config{IdempotencyRetentionMs: time.Hour.Milliseconds()}
	store := openVerified(t, dir, cfg)
	key := binary.BigEndian.AppendUint64(nil, readModelTasks(t, store)[id].CreateSeq)
	doc, _ := store.ReadModelGet(projections.RMTasks, key)
	doc[len(doc)-1] ^= 1
	if err := store.ResetReadModel(changed(t, store, projections.RMTasks, string(key), doc)); err != nil {
		t.Fatal(err)
	}
	_, err := node.Verify(store, cfg, nil)
	if err == nil || !strings.Contains(err.Error(), projections.RMTasks) {
		t.Fatalf("verify of a changed read model: %v", err)
	}
}

// changed is the whole read model of store with one value replaced.
func changed(t *testing.T, store *ledger.Store, bucket, key string, value []byte) []ledger.ReadModelWrite {
	t.Helper()
	var ws []ledger.ReadModelWrite
	err := store.ReadModelBuckets(func(b string, k, v []byte) error {
		w := ledger.ReadModelWrite{Bucket: b, Key: append([]byte(nil), k...), Value: append([]byte{}, v...)}
		if b == bucket && string(k) == key {
			w.Value = value
		}
		ws = append(ws, w)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// pageIDs walks the admin list of query page by page (limit 1, the
// cursors it answers) and returns the task ids in order.
func pageIDs(t *testing.T, n *nodetest.Node, query string) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for range 100 {
		q := "/tasks?limit=2" + query
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		r := n.Admin("GET", q, nil)
		nodetest.Must(t, r, 200)
		body := r.JSON()
		for _, task := range body["tasks"].([]any) {
			ids = append(ids, task.(map[string]any)["id"].(string))
		}
		next, _ := body["next_cursor"].(string)
		if next == "" {
			return ids
		}
		cursor = next
	}
	t.Fatal("the list does not end")
	return nil
}

// withoutNow drops what an answer computes from the time it is read.
// A settled task leaves the projections in memory and every read of it —
// its detail, its events, its provenance, the admin list with its filters
// and cursors, the per-state counts, an operator command's refusal —
// answers as it did while it was in memory, before and after a restart.
func TestSettledTaskLeavesMemoryAndReadsAsBefore(t *testing.T) {
	hour := nodetest.WithConfig(func(c *commands.Config) { c.IdempotencyRetention = time.Hour })
	n := nodetest.Start(t, hour)
	d := n.ReadyDevice(t)
	run := n.StartTask(t, d, map[string]any{"n": 1})
	nodetest.Must(t, run.Complete(map[string]any{"ok": true}), 200)
	canceled := n.CreateTask(nil)
	nodetest.Must(t, n.Cancel(canceled), 200)
	pending := n.CreateTask(nil)
	settled := []string{run.TaskID, canceled}

	type reads struct {
		docs, events, provenance map[string]string
		all, done, byState       []string
		counts                   string
	}
	read := func() reads {
		r := reads{docs: map[string]string{}, events: map[string]string{}, provenance: map[string]string{}}
		for _, id := range settled {
			r.docs[id] = string(okBody(t, n.Admin("GET", "/tasks/"+id, nil)))
			r.events[id] = string(okBody(t, n.Admin("GET", "/tasks/"+id+"/events", nil)))
			r.provenance[id] = string(okBody(t, n.Admin("GET", "/tasks/"+id+"/provenance", nil)))
		}
		r.all = pageIDs(t, n, "")
		r.done = pageIDs(t, n, "&state=SUCCEEDED")
		r.byState = pageIDs(t, n, "&state=CANCELED")
		list := n.Admin("GET", "/tasks", nil).JSON()
		r.counts = fmt.Sprint(list["counts"])
		return r
	}
	nodetest.MustError(t, n.Cancel(canceled), 409, "invalid_state")
	n.Advance(2 * time.Hour)   // no event: nothing settles yet
	before := read()           // (time-dependent fields as of now: an authorization expired)
	newer := n.CreateTask(nil) // the event that settles both
	n.Engine.Read(func(s *projections.State) {
		for _, id := range settled {
			if s.Tasks[id] != nil {
				t.Errorf("settled task %s is still in memory", id)
			}
		}
		if s.Tasks[pending] == nil || s.Tasks[newer] == nil {
			t.Errorf("a live task left memory")
		}
	})
	check := func(when string) {
		after := read()
		for _, id := range settled {
			if after.docs[id] != before.docs[id] {
				t.Errorf("%s: detail of %s\n%s\nwas\n%s", when, id, after.docs[id], before.docs[id])
			}
			if after.events[id] != before.events[id] || after.provenance[id] != before.provenance[id] {
				t.Errorf("%s: events or provenance of %s changed", when, id)
			}
		}
		if fmt.Sprint(after.all) != fmt.Sprint(append([]string{newer}, before.all...)) ||
			fmt.Sprint(after.done) != fmt.Sprint(before.done) || fmt.Sprint(after.byState) != fmt.Sprint(before.byState) {
			t.Errorf("%s: lists %v %v %v, were %v %v %v", when, after.all, after.done, after.byState, before.all, before.done, before.byState)
		}
		if !strings.Contains(after.counts, "PENDING:2") || after.counts != strings.Replace(before.counts, "PENDING:1", "PENDING:2", 1) {
			t.Errorf("%s: counts %s, were %s", when, after.counts, before.counts)
		}
		nodetest.MustError(t, n.Cancel(canceled), 409, "invalid_state")
		nodetest.MustError(t, n.Admin("GET", "/tasks/"+nodetest.NewID(), nil), 404, "task_not_found")
	}
	check("settled")
	n = n.Restart(hour)
	check("after a restart")
}

// okBody asserts a 200 and returns the body.
func okBody(t *testing.T, r *nodetest.Resp) []byte {
	t.Helper()
	nodetest.Must(t, r, 200)
	return r.Body
}

// Start keeps every blob a settled task references — its reference image,
// one it replaced, its evidence — found through the read model's indexes,
// and still collects an orphan; the settled task's blobs are served.
func TestStartKeepsTheBlobsOfSettledTasks(t *testing.T) {
	hour := nodetest.WithConfig(func(c *commands.Config) { c.IdempotencyRetention = time.Hour })
	n := nodetest.Start(t, hour)
	id := n.CreateTask(map[string]any{"k": 1})
	old, current := gcImage(t, 1, false), gcImage(t, 2, false)
	for _, img := range [][]byte{old, current} {
		nodetest.Must(t, n.Do("PUT", "/api/v1/admin/tasks/"+id+"/reference-image", n.AdminToken, img,
			map[string]string{"Content-Type": "image/jpeg"}), 200)
	}
	nodetest.Must(t, n.Cancel(id), 200)
	d := n.ReadyDevice(t)
	run := n.StartTask(t, d, map[string]any{"k": 2})
	shot := gcImage(t, 3, true)
	up := n.Do("POST", "/api/v1/device/tasks/"+run.TaskID+"/evidence", d.Token, shot, map[string]string{
		"Content-Type": "image/png", "X-Claim-Token": run.Token, "X-Claim-Generation": "1",
		"X-Execution-Id": run.ExecutionID, "X-Evidence-Kind": "screenshot", "X-Captured-At": "2026-03-01T10:00:00.000Z"})
	nodetest.Must(t, up, 201)
	nodetest.Must(t, run.Complete(map[string]any{"ok": true}), 200)
	n.Advance(2 * time.Hour)
	n.CreateTask(nil) // settles both
	n.Engine.Read(func(s *projections.State) {
		if s.Tasks[id] != nil || s.Tasks[run.TaskID] != nil {
			t.Fatal("the tasks did not settle")
		}
	})
	orphan := gcImage(t, 4, true)
	if err := os.WriteFile(filepath.Join(n.Dir, ledger.BlobDir, gcSHA(orphan)), orphan, 0o600); err != nil {
		t.Fatal(err)
	}
	m := n.Restart(hour)
	want := []string{gcSHA(old), gcSHA(current), gcSHA(shot)}
	sort.Strings(want)
	if got := blobNames(t, m.Dir); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("blobs after start: %v, want %v", got, want)
	}
	img := m.Do("GET", "/api/v1/admin/tasks/"+id+"/reference-image", m.AdminToken, nil, nil)
	if img.Status != 200 || !bytes.Equal(img.Body, current) {
		t.Fatalf("reference image of a settled task: %d", img.Status)
	}
	ev := m.Task(run.TaskID)["evidence"].([]any)[0].(map[string]any)
	got := m.Do("GET", "/api/v1/admin/tasks/"+run.TaskID+"/evidence/"+nodetest.Str(ev, "evidence_id"), m.AdminToken, nil, nil)
	if got.Status != 200 || !bytes.Equal(got.Body, shot) {
		t.Fatalf("evidence of a settled task: %d", got.Status)
	}
}

// A start with no snapshot to load rebuilds a read model that is not the
// log's in its one replay of the whole log, but makes it current (its
// meta record) only once the start's checks of the log passed: a start
// refused after that replay (here the log ends before the head of the
// last commit) leaves no read model that a later start would keep.
func TestWholeLogStartMakesTheReadModelCurrentOnlyAfterItsChecks(t *testing.T) {
	hour := nodetest.WithConfig(func(c *commands.Config) { c.IdempotencyRetention = time.Hour })
	n := nodetest.Start(t, hour)
	a := n.CreateTask(nil)
	nodetest.Must(t, n.Cancel(a), 200)
	n.Advance(2 * time.Hour)
	n.CreateTask(nil)
	n.Close()
	older, err := os.ReadFile(filepath.Join(n.Dir, ledger.FileName))
	if err != nil {
		t.Fatal(err)
	}
	n = n.Restart(hour)
	n.CreateTask(nil)
	n.Close()
	if err := os.WriteFile(filepath.Join(n.Dir, ledger.FileName), older, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(n.Dir, "snapshots")); err != nil {
		t.Fatal(err)
	}
	cfg := commands.DefaultConfig()
	cfg.IdempotencyRetention = 20 * time.Minute // another read model than the one on disk
	nd, err := node.Open(node.Config{DataDir: n.Dir, Manual: true, Commands: cfg, Logger: zerolog.Nop()})
	if err == nil {
		nd.Close()
		t.Fatal("a log that ends before its last commit was served")
	}
	if !errors.Is(err, node.ErrLogBehindHead) {
		t.Fatalf("refusal %v, want the log behind its head", err)
	}
	store, err := ledger.Open(n.Dir, ledger.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	head, err := store.Head()
	if err != nil {
		t.Fatal(err)
	}
	rmHead, _ := store.ReadModelGet(projections.RMMeta, projections.RMHeadKey())
	version, _ := store.ReadModelGet(projections.RMMeta, projections.RMVersionKey())
	pcfg := projections.Config{IdempotencyRetentionMs: cfg.IdempotencyRetention.Milliseconds()}
	if projections.ReadModelCurrentAt(pcfg, head.Seq, rmHead, version) || rmHead != nil || version != nil {
		t.Fatalf("a start refused after its replay left a meta record (head %x, version %x)", rmHead, version)
	}
	// The replay wrote the documents: the task settled under 20m is there.
	if got := readModelTasks(t, store); got[a] == nil {
		t.Fatalf("the refused start's replay wrote %d tasks", len(got))
	}
}

// openVerified opens the stopped ledger in dir and checks that verify
// passes on it before a test changes it (closed at the test's end).
func openVerified(t *testing.T, dir string, cfg projections.Config) *ledger.Store {
	t.Helper()
	store, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if _, err := node.Verify(store, cfg, nil); err != nil {
		t.Fatalf("verify before the change: %v", err)
	}
	return store
}
