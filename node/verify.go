package node

import (
	"bytes"
	"errors"
	"fmt"
	"sort"

	"taskledger/audit/checkpoint"
	"taskledger/audit/merkle"
	"taskledger/ledger"
	"taskledger/projections"
	"taskledger/snapshots"
)

// Violation is the first problem verify found, with its seq (0 when it is
// not about one event).
type Violation struct {
	Seq uint64
	Err error
}

func (v *Violation) Error() string {
	if v.Seq == 0 {
		return v.Err.Error()
	}
	return fmt.Sprintf("seq %d: %v", v.Seq, v.Err)
}

func (v *Violation) Unwrap() error { return v.Err }

// VerifyReport is what a passing verify saw.
type VerifyReport struct {
	Events uint64
	Head   ledger.Head
	State  *projections.State
	// Snapshots is how many snapshot files were checked (snapshot + tail =
	// full replay); SkippedSnapshots are those of another projection
	// schema or configuration, which start-up ignores too.
	Snapshots        int
	SkippedSnapshots []snapshots.Refusal
	// Tree is the Merkle tree rebuilt from the log; Checkpoints is how many
	// stored checkpoints were checked against it.
	Tree        *merkle.Tree
	Checkpoints int
	// ReadModelChecked says the on-disk read model of finished tasks was
	// compared with the replay's, key by key; false when it is not this
	// build's (another layout, schema or retention) or not at the log's
	// head: start-up rebuilds it then.
	ReadModelChecked bool
}

// Verify checks a ledger: bbolt's own consistency, seq density from 1, the
// hash chain, every envelope re-encoding to its stored bytes, every event
// allowed by the state machine and the invariants of domain.md (applied by
// projections), the head record, and that replaying twice gives identical
// projections, and that every snapshot in the data directory is intact,
// matches the log at its seq, and with the log after it gives the same
// projections as the whole log. secret, when given, recomputes every
// server-issued claim.
func Verify(store *ledger.Store, cfg projections.Config, secret []byte) (*VerifyReport, error) {
	if err := store.Check(); err != nil {
		return nil, &Violation{Err: err}
	}
	cv := NewChainVerifier(cfg)
	if err := store.RangeRaw(0, cv.Add); err != nil {
		return nil, cv.violation(err)
	}
	st, tree, prev, n := cv.st, cv.tree, cv.prev, cv.n
	head, err := store.Head()
	if err != nil {
		return nil, &Violation{Err: err}
	}
	if head.Seq != prev.Seq || !bytes.Equal(head.Hash, prev.Hash) {
		return nil, &Violation{Seq: prev.Seq, Err: fmt.Errorf("head record names seq %d, the log ends at %d", head.Seq, prev.Seq)}
	}
	if err := st.LoadSoft(store); err != nil {
		return nil, &Violation{Err: fmt.Errorf("soft records: %w", err)}
	}
	// The second replay hands each task to the checks as it settles (the
	// replay keeps only what is live): its blobs, and its read-model
	// entries on disk when the read model is this build's at the head.
	rmChecked, err := readModelCurrent(store, st)
	if err != nil {
		return nil, &Violation{Err: err}
	}
	compare, compareTomb, finish := compareReadModel(store)
	dataDir := DataDir(store)
	again, err := projections.RebuildSettling(store, cfg, func(t *projections.Task) error {
		if err := checkTaskBlobs(dataDir, t); err != nil {
			return err
		}
		if rmChecked {
			return compare(t)
		}
		return nil
	}, func(t string) error {
		if rmChecked {
			return compareTomb(t)
		}
		return nil
	}, nil)
	if err != nil {
		return nil, &Violation{Err: fmt.Errorf("second replay: %w", err)}
	}
	a, _ := st.CanonicalWithSoft()
	b, _ := again.CanonicalWithSoft()
	if !bytes.Equal(a, b) {
		return nil, &Violation{Err: errors.New("replaying the log twice gave different projections")}
	}
	if rmChecked {
		if err := finish(again); err != nil {
			return nil, &Violation{Err: err}
		}
	}
	if err := verifyBlobs(dataDir, st); err != nil {
		return nil, &Violation{Err: err}
	}
	if secret != nil {
		if err := VerifyServerClaims(store, secret, 0); err != nil {
			return nil, &Violation{Err: err}
		}
	}
	checkpoints, err := verifyCheckpoints(store, tree)
	if err != nil {
		return nil, err
	}
	checked, skipped, err := verifySnapshots(store, cfg, st)
	if err != nil {
		return nil, err
	}
	return &VerifyReport{Events: n, Head: head, State: st, Snapshots: checked, SkippedSnapshots: skipped,
		Tree: tree, Checkpoints: checkpoints, ReadModelChecked: rmChecked}, nil
}

// verifyCheckpoints checks every stored checkpoint against the tree
// rebuilt from the log: signed by the data directory's key, of a size the
// log has reached, with the root of that size.
func verifyCheckpoints(store *ledger.Store, tree *merkle.Tree) (int, error) {
	key, err := checkpoint.LoadKey(DataDir(store))
	if errors.Is(err, checkpoint.ErrNoKey) {
		return 0, nil // a ledger never served since checkpoints exist
	}
	if err != nil {
		return 0, &Violation{Err: err}
	}
	n := 0
	err = store.CheckpointSizes(func(size uint64, note []byte) error {
		cp, err := checkpoint.Open(note, key.Verifier())
		if err != nil {
			return &Violation{Err: fmt.Errorf("checkpoint of size %d: %w", size, err)}
		}
		if cp.Size != size {
			return &Violation{Err: fmt.Errorf("checkpoint stored under size %d names size %d", size, cp.Size)}
		}
		root, err := tree.Root(size)
		if err != nil {
			return &Violation{Err: fmt.Errorf("checkpoint of size %d: the log has only %d events", size, tree.Size())}
		}
		if !bytes.Equal(root, cp.Root) {
			return &Violation{Err: fmt.Errorf("checkpoint of size %d: root hash differs from the Merkle tree of the log", size)}
		}
		n++
		return nil
	})
	return n, err
}

// verifyBlobs checks every blob the live projections reference (reference
// images, evidence): present, of the recorded size, hashing to its name.
// (Those of settled tasks are checked as the second replay settles them.)
func verifyBlobs(dataDir string, st *projections.State) error {
	ids := make([]string, 0, len(st.Tasks))
	for id := range st.Tasks {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if err := checkTaskBlobs(dataDir, st.Tasks[id]); err != nil {
			return err
		}
	}
	return nil
}

// checkTaskBlobs checks the blobs one task references.
func checkTaskBlobs(dataDir string, t *projections.Task) error {
	if t.Image != nil {
		if err := ledger.CheckBlob(dataDir, t.Image.SHA256, t.Image.Size); err != nil {
			return fmt.Errorf("task %s reference image: %w", t.ID, err)
		}
	}
	for _, e := range t.Evidence {
		if err := ledger.CheckBlob(dataDir, e.SHA256, e.Size); err != nil {
			return fmt.Errorf("task %s evidence %s: %w", t.ID, e.ID, err)
		}
	}
	return nil
}

// ChainVerifier checks a log event by event, from seq 1, wherever its
// stored bytes come from (the ledger's file, or a server's envelopes read
// through the API): dense seqs, the hash chain, the canonical encoding,
// the state machine and invariants (projections), and every task's rules.
type ChainVerifier struct {
	st    *projections.State
	rules *projections.TaskRules
	tree  *merkle.Tree
	prev  ledger.Head
	n     uint64
}

// NewChainVerifier starts a check at the genesis head.
func NewChainVerifier(cfg projections.Config) *ChainVerifier {
	st := projections.New(cfg)
	st.DiscardSettled() // the read model is compared by Verify's second replay
	return &ChainVerifier{st: st, rules: projections.NewTaskRules(), tree: merkle.New(), prev: ledger.GenesisHead()}
}

// Add checks the event stored as raw under seq; the first problem is a
// *Violation naming its seq.
func (c *ChainVerifier) Add(seq uint64, raw []byte) error {
	prev := c.prev
	if seq != prev.Seq+1 {
		return &Violation{Seq: prev.Seq + 1, Err: fmt.Errorf("seq is not dense: next stored event is %d", seq)}
	}
	e, err := ledger.DecodeEvent(raw)
	if err != nil {
		return &Violation{Seq: seq, Err: err}
	}
	if e.Seq != seq {
		return &Violation{Seq: seq, Err: fmt.Errorf("event stored under seq %d names seq %d", seq, e.Seq)}
	}
	if !bytes.Equal(e.PrevHash, prev.Hash) {
		return &Violation{Seq: seq, Err: errors.New("prev_hash does not chain from the previous event")}
	}
	h, err := ledger.ComputeHash(&e)
	if err != nil || !bytes.Equal(h, e.Hash) {
		return &Violation{Seq: seq, Err: errors.New("hash does not match the event's content")}
	}
	if re, err := ledger.Marshal(&e); err != nil || !bytes.Equal(re, raw) {
		return &Violation{Seq: seq, Err: errors.New("stored bytes are not the canonical encoding of the event")}
	}
	if err := c.st.Apply(&e); err != nil {
		return &Violation{Seq: seq, Err: err}
	}
	if err := c.rules.Check(&e); err != nil { // what an audit bundle's reader checks, over every task
		return &Violation{Seq: seq, Err: err}
	}
	if err := c.tree.Append(seq, [][]byte{raw}); err != nil {
		return &Violation{Seq: seq, Err: err}
	}
	c.prev = ledger.Head{Seq: e.Seq, Hash: e.Hash, At: e.At}
	c.n++
	return nil
}

// violation is err as a *Violation (at the next seq when it names none).
func (c *ChainVerifier) violation(err error) *Violation {
	var v *Violation
	if errors.As(err, &v) {
		return v
	}
	return &Violation{Seq: c.prev.Seq + 1, Err: err}
}

// Head is the last event checked; Events how many were.
func (c *ChainVerifier) Head() ledger.Head { return c.prev }

// Events is how many events were checked.
func (c *ChainVerifier) Events() uint64 { return c.n }

// Tree is the Merkle tree over the events checked.
func (c *ChainVerifier) Tree() *merkle.Tree { return c.tree }

// State is the projections folded from the events checked.
func (c *ChainVerifier) State() *projections.State { return c.st }
