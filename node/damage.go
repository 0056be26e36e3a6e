package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"taskledger/ledger"
	"taskledger/snapshots"
)

// ErrLogMissing is a data directory whose log is missing or empty while its
// snapshots prove that events existed.
var ErrLogMissing = errors.New("the log is missing or empty but snapshots prove it held events")

// checkLogPresent refuses to start a new, empty ledger where snapshots
// cover seq > 0: the log was lost, not never written.
func checkLogPresent(dataDir string) error {
	path := filepath.Join(dataDir, ledger.FileName)
	fi, err := os.Stat(path)
	missing := errors.Is(err, os.ErrNotExist)
	if err != nil && !missing {
		return fmt.Errorf("stat %s: %w", ledger.FileName, err)
	}
	if !missing && fi.Size() > 0 {
		return nil
	}
	snaps, err := snapshots.List(snapshots.Dir(dataDir))
	if err != nil {
		return err
	}
	if len(snaps) == 0 || snaps[0].Seq == 0 {
		return nil
	}
	what := "missing"
	if !missing {
		what = "empty (0 bytes)"
	}
	return fmt.Errorf("%w: %s is %s, but %s covers the log up to seq %d; restore %s from a backup "+
		"(a log that ends at seq %d or later) and start again; the snapshot alone cannot replace the log",
		ErrLogMissing, ledger.FileName, what, filepath.Base(snaps[0].Path), snaps[0].Seq, ledger.FileName, snaps[0].Seq)
}
