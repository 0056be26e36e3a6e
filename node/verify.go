package node

import (
	"bytes"
	"errors"
	"fmt"
	"sort"

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
	st := projections.New(cfg)
	prev := ledger.GenesisHead()
	var n uint64
	err := store.RangeRaw(0, func(seq uint64, raw []byte) error {
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
		if err := st.Apply(&e); err != nil {
			return &Violation{Seq: seq, Err: err}
		}
		prev = ledger.Head{Seq: e.Seq, Hash: e.Hash, At: e.At}
		n++
		return nil
	})
	if err != nil {
		var v *Violation
		if errors.As(err, &v) {
			return nil, v
		}
		return nil, &Violation{Seq: prev.Seq + 1, Err: err}
	}
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
	again, err := projections.Rebuild(store, cfg)
	if err != nil {
		return nil, &Violation{Err: fmt.Errorf("second replay: %w", err)}
	}
	a, _ := st.CanonicalWithSoft()
	b, _ := again.CanonicalWithSoft()
	if !bytes.Equal(a, b) {
		return nil, &Violation{Err: errors.New("replaying the log twice gave different projections")}
	}
	if err := verifyBlobs(DataDir(store), st); err != nil {
		return nil, &Violation{Err: err}
	}
	if secret != nil {
		if err := VerifyServerClaims(store, secret, 0); err != nil {
			return nil, &Violation{Err: err}
		}
	}
	checked, skipped, err := verifySnapshots(store, cfg, st)
	if err != nil {
		return nil, err
	}
	return &VerifyReport{Events: n, Head: head, State: st, Snapshots: checked, SkippedSnapshots: skipped}, nil
}

// verifyBlobs checks every blob the projections reference (reference
// images, evidence): present, of the recorded size, hashing to its name.
func verifyBlobs(dataDir string, st *projections.State) error {
	ids := make([]string, 0, len(st.Tasks))
	for id := range st.Tasks {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		t := st.Tasks[id]
		if t.Image != nil {
			if err := ledger.CheckBlob(dataDir, t.Image.SHA256, t.Image.Size); err != nil {
				return fmt.Errorf("task %s reference image: %w", id, err)
			}
		}
		for _, e := range t.Evidence {
			if err := ledger.CheckBlob(dataDir, e.SHA256, e.Size); err != nil {
				return fmt.Errorf("task %s evidence %s: %w", id, e.ID, err)
			}
		}
	}
	return nil
}
