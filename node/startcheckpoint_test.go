package node_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"taskledger/audit/checkpoint"
	"taskledger/ledger"
	"taskledger/node"
	"taskledger/node/nodetest"
)

// putCheckpoint stores a checkpoint signed with the data directory's key.
func putCheckpoint(t *testing.T, dir string, size uint64, root []byte) {
	t.Helper()
	key, err := checkpoint.LoadKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	note, err := key.Sign(checkpoint.Checkpoint{Size: size, Root: root, Time: 1})
	if err != nil {
		t.Fatal(err)
	}
	putNote(t, dir, size, note)
}

func putNote(t *testing.T, dir string, size uint64, note []byte) {
	t.Helper()
	st, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.PutCheckpoint(size, note); err != nil {
		t.Fatal(err)
	}
}

func stoppedLedger(t *testing.T) (string, uint64) {
	n := nodetest.Start(t)
	for range 3 {
		n.CreateTask(nil)
	}
	head := n.Head()
	n.Close()
	return n.Dir, head
}

// A signed checkpoint whose root the stored events do not rebuild refuses
// the start, though every event's hash holds.
func TestStartRefusesARootTheLogDoesNotRebuild(t *testing.T) {
	dir, head := stoppedLedger(t)
	putCheckpoint(t, dir, head, bytes.Repeat([]byte{7}, 32))
	nd, err := openAt(dir)
	if err == nil {
		nd.Close()
		t.Fatal("a log whose Merkle root differs from its signed checkpoint was served")
	}
	if !errors.Is(err, node.ErrChain) || !strings.Contains(err.Error(), "does not match its signed checkpoint") {
		t.Fatalf("refusal %v, want a root mismatch", err)
	}
}

// A signed checkpoint of more events than the log holds refuses the start.
func TestStartRefusesACheckpointBeyondTheLog(t *testing.T) {
	dir, head := stoppedLedger(t)
	putCheckpoint(t, dir, head+5, bytes.Repeat([]byte{7}, 32))
	nd, err := openAt(dir)
	if err == nil {
		nd.Close()
		t.Fatal("a log shorter than its signed checkpoint was served")
	}
	if !errors.Is(err, node.ErrLogBehindHead) {
		t.Fatalf("refusal %v, want %v", err, node.ErrLogBehindHead)
	}
}

// A stored checkpoint that does not open with the key (damaged) is passed
// over for the next older one: the intact log starts.
func TestStartPassesOverACheckpointThatDoesNotOpen(t *testing.T) {
	dir, head := stoppedLedger(t)
	putNote(t, dir, head+5, []byte("not a signed note\n"))
	nd, err := openAt(dir)
	if err != nil {
		t.Fatalf("a damaged checkpoint refused an intact log: %v", err)
	}
	nd.Close()
}
