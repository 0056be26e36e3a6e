package main_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"

	"taskledger/commands"
	"taskledger/node"
	"taskledger/node/nodetest"
	"taskledger/node/nodetest/proc"
)

// damagedDir returns a data directory with a few events and a snapshot
// covering them, the server stopped.
func damagedDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s := startServer(t, dir)
	tok := s.Admin
	c := proc.NewClient()
	for i := range 20 {
		a, err := c.Do(s.URL, "POST", "/api/v1/admin/tasks", tok, map[string]any{"payload": map[string]any{"n": i}}, nil)
		if err != nil || a.Status != 201 {
			t.Fatalf("create task: %v %v", a, err)
		}
	}
	if code := s.Stop(t); code != 0 {
		t.Fatalf("stop: %d", code)
	}
	if r := proc.CLI(t, "snapshot", "create", "--data", dir); r.Code != 0 {
		t.Fatalf("snapshot create: %d %s", r.Code, r.Stderr)
	}
	return dir
}

func refusedClearly(t *testing.T, what string, r proc.Result, want ...string) {
	t.Helper()
	if r.Code == 0 {
		t.Fatalf("%s: exit 0, want a refusal\n%s", what, r.Stderr)
	}
	for _, bad := range []string{"panic", "SIGSEGV", "goroutine "} {
		if strings.Contains(r.Stderr, bad) {
			t.Fatalf("%s crashed instead of refusing:\n%s", what, r.Stderr)
		}
	}
	for _, w := range want {
		if !strings.Contains(r.Stderr, w) {
			t.Fatalf("%s: stderr lacks %q:\n%s", what, w, r.Stderr)
		}
	}
}

// A log file cut short (its end lost) is refused by serve and reported by
// verify, before bbolt reads past the end of the file.
func TestTruncatedLogIsRefused(t *testing.T) {
	dir := damagedDir(t)
	db := filepath.Join(dir, "taskledger.db")
	if err := os.Truncate(db, 3*4096); err != nil {
		t.Fatal(err)
	}
	refusedClearly(t, "serve", proc.CLI(t, "serve", "--data", dir, "--listen", "127.0.0.1:0", "--clock=manual"), "truncated")
	refusedClearly(t, "verify", proc.CLI(t, "verify", "--data", dir), "truncated")
	if fi, _ := os.Stat(db); fi.Size() != 3*4096 {
		t.Fatalf("the refusal changed the file: %d bytes", fi.Size())
	}
}

// A missing or empty log beside snapshots that cover events is refused:
// the message names the snapshot's seq and says to restore the log.
func TestMissingLogBesideSnapshotsIsRefused(t *testing.T) {
	dir := damagedDir(t)
	db := filepath.Join(dir, "taskledger.db")
	if err := os.WriteFile(db, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	serve := func() proc.Result {
		return proc.CLI(t, "serve", "--data", dir, "--listen", "127.0.0.1:0", "--clock=manual")
	}
	refusedClearly(t, "serve on an empty log", serve(), "empty", "up to seq ", "snapshot-", "restore")
	if fi, _ := os.Stat(db); fi.Size() != 0 {
		t.Fatalf("serve wrote a new ledger over the empty file (%d bytes)", fi.Size())
	}
	refusedClearly(t, "verify on an empty log", proc.CLI(t, "verify", "--data", dir), "empty")
	os.Remove(db)
	refusedClearly(t, "serve on a missing log", serve(), "missing", "restore")
	if _, err := os.Stat(db); err == nil {
		t.Fatalf("serve created a new ledger beside the snapshots")
	}
}

func openNode(dir string) (*node.Node, error) {
	return node.Open(node.Config{DataDir: dir, Manual: true, Commands: commands.DefaultConfig(), SnapshotEvery: 100000,
		Logger: zerolog.Nop()})
}

// An event whose content no longer matches its hash is refused at start,
// naming its seq: start-up never folds and serves an edited event.
func TestStartRefusesAnEditedEvent(t *testing.T) {
	src, events := goodLedger(t)
	bad := events - 2
	dir := tampered(t, src, func(_ *bolt.Tx, b *bolt.Bucket) error {
		v := append([]byte(nil), b.Get(seqKey(bad))...)
		v[len(v)-1] ^= 0x80
		return b.Put(seqKey(bad), v)
	})
	n, err := openNode(dir)
	if err == nil {
		n.Close()
		t.Fatalf("a log with an edited event at seq %d was served", bad)
	}
	if !errors.Is(err, node.ErrChain) || !strings.Contains(err.Error(), fmt.Sprintf("seq %d", bad)) {
		t.Fatalf("refusal %v, want the broken hash chain at seq %d", err, bad)
	}
	r := proc.CLI(t, "serve", "--data", dir, "--listen", "127.0.0.1:0", "--clock=manual")
	refusedClearly(t, "serve", r, "hash chain", fmt.Sprintf("seq %d", bad))
}

// The head of the last commit is kept beside the log: a log that ends
// before it (an older copy, or bbolt fallen back to its older meta page)
// is refused at start.
func TestStartRefusesALogThatEndsBeforeItsHead(t *testing.T) {
	n := nodetest.Start(t)
	n.CreateTask(map[string]any{"i": 1})
	n.Close()
	older, err := os.ReadFile(filepath.Join(n.Dir, "taskledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	n = n.Restart()
	n.CreateTask(map[string]any{"i": 2})
	head := n.Head()
	n.Close()
	if err := os.WriteFile(filepath.Join(n.Dir, "taskledger.db"), older, 0o600); err != nil {
		t.Fatal(err)
	}
	nd, err := openNode(n.Dir)
	if err == nil {
		nd.Close()
		t.Fatalf("a log that ends before its last acknowledged commit (seq %d) was served", head)
	}
	if !errors.Is(err, node.ErrLogBehindHead) || !strings.Contains(err.Error(), fmt.Sprintf("seq %d", head)) {
		t.Fatalf("refusal %v, want the log behind head seq %d", err, head)
	}
	// verify reports it too: the older log is sound in itself.
	r := proc.CLI(t, "verify", "--data", n.Dir)
	if r.Code != 1 || !strings.Contains(r.Stderr, fmt.Sprintf("seq %d", head)) || !strings.Contains(r.Stderr, "head") {
		t.Fatalf("verify of a log behind its head: %d %q", r.Code, r.Stderr)
	}
}

// An edit of the last event's content that still decodes (a letter of
// its stored bytes changed) is refused at start: its hash no longer
// matches, though no later event's prev_hash shows it.
func TestStartRefusesAnEditedLastEvent(t *testing.T) {
	src, events := goodLedger(t)
	dir := tampered(t, src, func(_ *bolt.Tx, b *bolt.Bucket) error {
		v := append([]byte(nil), b.Get(seqKey(events))...)
		i := strings.Index(string(v), "complete")
		if i < 0 {
			i = strings.Index(string(v), "task.")
		}
		if i < 0 {
			return fmt.Errorf("no text to edit in the last event")
		}
		v[i] = 'C'
		return b.Put(seqKey(events), v)
	})
	n, err := openNode(dir)
	if err == nil {
		n.Close()
		t.Fatalf("a log whose last event (seq %d) was edited was served", events)
	}
	if !errors.Is(err, node.ErrChain) || !strings.Contains(err.Error(), fmt.Sprintf("seq %d", events)) {
		t.Fatalf("refusal %v, want the broken hash chain at seq %d", err, events)
	}
}
