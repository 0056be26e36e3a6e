package node

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"

	"taskledger/ledger"
	"taskledger/projections"
	"taskledger/snapshots"
)

// verifySnapshots checks every snapshot file of the ledger's data
// directory against the log: it must decode with a valid checksum, match
// the log at its seq, and the projections restored from it plus the log
// after it must equal full (the projections of the whole log). A snapshot
// of another projection schema or configuration is skipped (start-up
// ignores it too) and returned in skipped.
func verifySnapshots(store *ledger.Store, cfg projections.Config, full *projections.State) (checked int,
	skipped []snapshots.Refusal, err error) {
	list, err := snapshots.List(snapshots.Dir(DataDir(store)))
	if err != nil {
		return 0, nil, &Violation{Err: err}
	}
	want, err := full.Canonical()
	if err != nil {
		return 0, nil, &Violation{Err: err}
	}
	for _, e := range list {
		name := filepath.Base(e.Path)
		s, err := snapshots.Read(e.Path)
		if err == nil {
			err = snapshots.Check(s, SnapshotWant(cfg), store)
		}
		if errors.Is(err, snapshots.ErrSchema) {
			skipped = append(skipped, snapshots.Refusal{Path: e.Path, Seq: e.Seq, Err: err})
			continue
		}
		if err != nil {
			return checked, skipped, &Violation{Seq: e.Seq, Err: fmt.Errorf("%s refused: %w", name, err)}
		}
		st, err := RestoreSnapshot(s, cfg)
		if err == nil {
			// The records it names by seq and the filter segments it
			// leaves out are rows of the read model.
			if err = st.UseFinished(store); err == nil {
				err = st.Replay(store, nil)
			}
		}
		if err != nil {
			return checked, skipped, &Violation{Seq: e.Seq, Err: fmt.Errorf("%s: snapshot + tail does not replay: %w", name, err)}
		}
		got, err := st.Canonical()
		if err != nil || !bytes.Equal(got, want) {
			return checked, skipped, &Violation{Seq: e.Seq,
				Err: fmt.Errorf("%s: projections from the snapshot + tail differ from the projections of the full log", name)}
		}
		checked++
	}
	return checked, skipped, nil
}
