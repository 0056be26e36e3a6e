package node

import (
	"bytes"
	"errors"
	"fmt"

	"taskledger/ledger"
	"taskledger/projections"
)

// VerifyBackend checks the log held by any backend (a replicated stream as
// well as the bbolt file): every event through the ChainVerifier (dense
// seqs from 1, the hash chain, the canonical encoding, the state machine,
// invariants and every task's rules), the head against the last event, the
// soft records, and that a second replay gives identical projections. What
// lives in a node's data directory (blobs, snapshots, checkpoints, bbolt's
// own check) is not part of it: Verify checks those for a bbolt ledger.
func VerifyBackend(b ledger.Backend, cfg projections.Config) (*VerifyReport, error) {
	cv := NewChainVerifier(cfg)
	if err := b.RangeRaw(0, cv.Add); err != nil {
		return nil, cv.violation(err)
	}
	head, err := b.Head()
	if err != nil {
		return nil, &Violation{Err: err}
	}
	if prev := cv.Head(); head.Seq != prev.Seq || !bytes.Equal(head.Hash, prev.Hash) {
		return nil, &Violation{Seq: prev.Seq, Err: fmt.Errorf("head names seq %d, the log ends at %d", head.Seq, prev.Seq)}
	}
	st := cv.State()
	if err := st.LoadSoft(b); err != nil {
		return nil, &Violation{Err: fmt.Errorf("soft records: %w", err)}
	}
	again, err := projections.Rebuild(b, cfg)
	if err != nil {
		return nil, &Violation{Err: fmt.Errorf("second replay: %w", err)}
	}
	x, _ := st.CanonicalWithSoft()
	y, _ := again.CanonicalWithSoft()
	if !bytes.Equal(x, y) {
		return nil, &Violation{Err: errors.New("replaying the log twice gave different projections")}
	}
	return &VerifyReport{Events: cv.Events(), Head: head, State: st, Tree: cv.Tree()}, nil
}
