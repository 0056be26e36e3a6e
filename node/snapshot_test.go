package node_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"taskledger/commands"
	"taskledger/ledger"
	"taskledger/node"
	"taskledger/node/nodetest"
	"taskledger/projections"
	"taskledger/snapshots"
)

// written collects the snapshots a node writes in the background.
type written struct {
	ch chan string
}

func newWritten() *written { return &written{ch: make(chan string, 64)} }

func (w *written) option() nodetest.Option {
	return func(c *node.Config) {
		c.SnapshotWritten = func(seq uint64, path string, err error) {
			if err != nil {
				path = "error: " + err.Error()
			}
			w.ch <- path
		}
	}
}

func every(n uint64) nodetest.Option { return func(c *node.Config) { c.SnapshotEvery = n } }

// work runs one task through claim, start, heartbeat and complete: 7 events
// (create, claim, start, heartbeat, complete, plus register on first use).
func work(t *testing.T, n *nodetest.Node, d *nodetest.Device) string {
	t.Helper()
	r := n.StartTask(t, d, map[string]any{"w": 1})
	nodetest.Must(t, r.Beat("s"), 200)
	nodetest.Must(t, r.Complete(map[string]any{"ok": true}), 200)
	return r.TaskID
}

func canonical(t *testing.T, n *nodetest.Node) []byte {
	t.Helper()
	var b []byte
	n.Engine.Read(func(s *projections.State) { b, _ = s.Canonical() })
	return b
}

func retentionCfg() projections.Config {
	return projections.Config{IdempotencyRetentionMs: commands.DefaultConfig().IdempotencyRetention.Milliseconds()}
}

// TestSnapshotEveryNAndStartFromSnapshotPlusTail: the running node writes
// a snapshot every N events in the background (keeping the newest two);
// a restart loads the newest one and replays only the tail, and its
// projections equal the ones before the restart (and, in the nodetest
// cleanup, a full replay; verify checks snapshot + tail = full log).
func TestSnapshotEveryNAndStartFromSnapshotPlusTail(t *testing.T) {
	w := newWritten()
	n := nodetest.Start(t, every(10), w.option())
	d := n.RegisterDevice()
	var got []string
	for i := 0; len(got) < 3; i++ { // 5 events a round: three snapshots within a few rounds
		if i == 40 {
			t.Fatalf("only %d snapshots after %d events", len(got), n.Head())
		}
		work(t, n, d)
		select {
		case p := <-w.ch:
			if strings.HasPrefix(p, "error") {
				t.Fatal(p)
			}
			got = append(got, p)
		default:
		}
	}
	work(t, n, d)  // a tail after the newest snapshot
	n.Node.Close() // waits for a snapshot being written
	list, err := snapshots.List(snapshots.Dir(n.Dir))
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != snapshots.Keep {
		t.Fatalf("snapshots on disk %v (written %v): want the newest %d", list, got, snapshots.Keep)
	}
	third, _ := snapshots.Read(got[2])
	if third == nil || list[0].Seq < third.Seq {
		t.Fatalf("newest on disk %d, third written %v", list[0].Seq, got[2])
	}
	newest := list[0].Seq
	head := n.Head()
	before := canonical(t, n)
	n2 := n.Restart(every(10)) // the nodetest checks run on the closed node
	if n2.Loaded.Snapshot == nil || n2.Loaded.Snapshot.Seq != newest || n2.Loaded.Replayed != head-newest {
		t.Fatalf("start-up loaded %+v (newest snapshot %d, head %d)", n2.Loaded, newest, head)
	}
	if !bytes.Equal(canonical(t, n2), before) {
		t.Fatal("projections after a restart from snapshot + tail differ")
	}
	// The restarted node keeps working on top of the snapshot.
	d2 := *d
	d2.N = n2
	work(t, n2, &d2)
}

// TestHandEditedSnapshotRefused: a snapshot edited by hand (one byte of
// its content) is refused by its checksum: verify reports it, start-up
// logs and ignores it, rebuilds from the log and writes a fresh snapshot.
func TestHandEditedSnapshotRefused(t *testing.T) {
	n := nodetest.Start(t)
	d := n.RegisterDevice()
	id := work(t, n, d)
	path, err := n.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	before := canonical(t, n)
	n.Close()

	raw, _ := os.ReadFile(path)
	i := bytes.Index(raw, []byte("device:")) // a record's scope: the task ended, so its state is on disk
	if i < 0 {
		t.Fatal("no record scope in the snapshot")
	}
	copy(raw[i:], "DEVICE:")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}

	store, err := ledger.Open(n.Dir, ledger.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	_, verr := node.Verify(store, retentionCfg(), nil)
	store.Close()
	var v *node.Violation
	if !errors.As(verr, &v) || !errors.Is(verr, snapshots.ErrChecksum) || !strings.Contains(verr.Error(), filepath.Base(path)) {
		t.Fatalf("verify of an edited snapshot: %v", verr)
	}

	n2 := nodetest.Start(t, nodetest.WithDir(n.Dir))
	if n2.Loaded.Snapshot != nil || len(n2.Loaded.Refused) != 1 || !errors.Is(n2.Loaded.Refused[0].Err, snapshots.ErrChecksum) {
		t.Fatalf("start-up with an edited snapshot: %+v", n2.Loaded)
	}
	if st := nodetest.Str(n2.Task(id), "state"); st != string(projections.StateSucceeded) {
		t.Fatalf("task state %s after start-up", st)
	}
	if !bytes.Equal(canonical(t, n2), before) {
		t.Fatal("projections differ after refusing the snapshot")
	}
	s, err := snapshots.Read(path)
	if err != nil || s.Seq != n2.Head() {
		t.Fatalf("no fresh snapshot replaced the edited one: %v", err)
	}
}

// TestSchemaChangeRebuildsOnStart: a snapshot of another projection schema
// version (as left by the previous build after SchemaVersion changed) is
// never loaded, even though its checksum is valid and it matches the log:
// start-up rebuilds from the log, its projections equal a fresh replay,
// and it writes a snapshot of the current schema.
func TestSchemaChangeRebuildsOnStart(t *testing.T) {
	n := nodetest.Start(t)
	d := n.RegisterDevice()
	id := work(t, n, d)
	pending := n.CreateTask(map[string]any{"right": true})
	var old *snapshots.Snapshot
	n.Engine.Read(func(s *projections.State) {
		// What an older projection code derived: here, wrongly, another
		// payload. Trusting it would show.
		b, _ := s.Canonical()
		st, _ := projections.Restore(b, s.Config())
		st.Tasks[pending].Payload = `{"right":false}`
		old, _ = node.NewSnapshot(st, nil)
	})
	old.Schema = projections.SchemaVersion - 1
	if _, err := snapshots.Write(snapshots.Dir(n.Dir), old); err != nil {
		t.Fatal(err)
	}
	n.Close() // verify skips (does not fail on) the other-schema snapshot

	n2 := nodetest.Start(t, nodetest.WithDir(n.Dir))
	if n2.Loaded.Snapshot != nil || len(n2.Loaded.Refused) != 1 || !errors.Is(n2.Loaded.Refused[0].Err, snapshots.ErrSchema) {
		t.Fatalf("start-up after a schema change: %+v", n2.Loaded)
	}
	if n2.Loaded.Replayed != n2.Head() {
		t.Fatalf("replayed %d events, the log has %d", n2.Loaded.Replayed, n2.Head())
	}
	store := n2.Store
	fresh, err := projections.Rebuild(store, retentionCfg())
	if err != nil {
		t.Fatal(err)
	}
	want, _ := fresh.Canonical()
	if !bytes.Equal(canonical(t, n2), want) {
		t.Fatal("projections after the rebuild differ from a fresh replay")
	}
	if st := nodetest.Str(n2.Task(id), "state"); st != string(projections.StateSucceeded) {
		t.Fatalf("task %s", st)
	}
	if p := nodetest.Obj(n2.Task(pending), "payload"); p["right"] != true {
		t.Fatalf("payload after the rebuild: %v", p)
	}
	s, err := snapshots.Read(filepath.Join(snapshots.Dir(n.Dir), snapshots.FileName(n2.Head())))
	if err != nil || s.Schema != projections.SchemaVersion {
		t.Fatalf("fresh snapshot after the rebuild: %v %+v", err, s)
	}
	n3 := n2.Restart()
	if n3.Loaded.Snapshot == nil || n3.Loaded.Replayed != 0 {
		t.Fatalf("the next start did not use the fresh snapshot: %+v", n3.Loaded)
	}
}

// TestSnapshotSecretKeyCheck: a node with a claim-token secret records its
// key-check value in its snapshots; a restart with the same secret starts
// from the snapshot, one with another secret is refused.
func TestSnapshotSecretKeyCheck(t *testing.T) {
	secret := bytes.Repeat([]byte{0xab}, 32)
	withSecret := func(s []byte) nodetest.Option {
		return nodetest.WithConfig(func(c *commands.Config) { c.ClaimSecret = s })
	}
	n := nodetest.Start(t, withSecret(secret))
	d := n.RegisterDevice()
	n.CreateTask(nil)
	nodetest.Must(t, d.Ready(), 200)
	nodetest.Must(t, d.ClaimWith(nodetest.NewKey(), ""), 200) // server-issued
	path, err := n.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	s, err := snapshots.Read(path)
	if err != nil || !bytes.Equal(s.KeyCheck, commands.SecretCheck(secret)) {
		t.Fatalf("snapshot key check: %v %x", err, s.KeyCheck)
	}
	n2 := n.Restart(withSecret(secret))
	if n2.Loaded.Snapshot == nil {
		t.Fatal("not started from the snapshot")
	}
	n2.Close()
	other := bytes.Repeat([]byte{0xcd}, 32)
	_, err = node.Open(node.Config{DataDir: n.Dir, Manual: true, Commands: func() commands.Config {
		c := commands.DefaultConfig()
		c.ClaimSecret = other
		return c
	}(), SnapshotEvery: 100000})
	if !errors.Is(err, node.ErrSecret) {
		t.Fatalf("another secret: %v", err)
	}
}

// TestSnapshotTimedReportsEachSnapshot: SnapshotTimed hears of every
// snapshot written, with its seq, the sequencer's hold for the capture and
// the whole duration (which includes the capture).
func TestSnapshotTimedReportsEachSnapshot(t *testing.T) {
	type timing struct {
		seq            uint64
		capture, total time.Duration
	}
	timed := make(chan timing, 64)
	w := newWritten()
	n := nodetest.Start(t, every(10), w.option(), func(c *node.Config) {
		c.SnapshotTimed = func(seq uint64, capture, total time.Duration) { timed <- timing{seq, capture, total} }
	})
	d := n.RegisterDevice()
	var path string
	for i := 0; path == ""; i++ {
		if i == 40 {
			t.Fatalf("no snapshot after %d events", n.Head())
		}
		work(t, n, d)
		select {
		case path = <-w.ch:
		default:
		}
	}
	if strings.HasPrefix(path, "error") {
		t.Fatal(path)
	}
	got := <-timed // told right after SnapshotWritten
	if got.seq < 10 || got.capture <= 0 || got.total < got.capture {
		t.Fatalf("timing %+v for the snapshot %s", got, path)
	}
	if filepath.Base(path) != snapshots.FileName(got.seq) {
		t.Errorf("timed seq %d, written %s", got.seq, path)
	}
}
