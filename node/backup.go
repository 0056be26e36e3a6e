package node

import (
	"bufio"
	"io"

	"taskledger/api"
	"taskledger/audit/transparency"
	"taskledger/backup"
	"taskledger/ledger"
)

// backupFunc is what GET /admin/backup runs on a bbolt node: one read
// transaction of the log while the sequencer keeps committing, the blobs
// its events reference and a checkpoint of its head signed now with the
// node's key (package backup).
func backupFunc(store *ledger.Store, tlog *transparency.Log, dataDir string, clock transparency.Clock) api.BackupFunc {
	return func(w io.Writer, started func(uint64, int64)) error {
		// The tree's root of the copy's head spares hashing every event
		// again; its leaves may trail the last commit by a batch.
		if err := tlog.CatchUp(); err != nil {
			return err
		}
		return store.View(func(v *ledger.View) error {
			p, err := backup.NewPlan(v, backup.Source{DataDir: dataDir, Key: tlog.Key(), Now: clock.Now(), Tree: tlog.Tree()})
			if err != nil {
				return err
			}
			started(p.Head().Seq, p.Size())
			bw := bufio.NewWriterSize(w, 1<<20) // fewer, larger writes to the connection
			if _, err := p.Write(bw); err != nil {
				return err
			}
			return bw.Flush()
		})
	}
}
