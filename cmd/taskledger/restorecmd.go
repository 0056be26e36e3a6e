package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"time"

	"taskledger/backup"
	"taskledger/ledger"
	"taskledger/node"
	"taskledger/projections"

	"github.com/spf13/cobra"
)

// cmdRestore: `restore --from FILE --data DIR [--key VERIFIER]` — unpack
// a backup into a temporary directory beside DIR, check all of it there
// (entries against the manifest, the checkpoint's signature, the whole
// log as verify checks it, the head, Merkle root and blob set against the
// manifest), and only then rename it to DIR. DIR must be new or empty; on
// any failure nothing is left behind.
func newRestoreCmd(stdout, stderr io.Writer) *cobra.Command {
	var from, data, key, led *string
	var retention *time.Duration
	c := command("restore", func(pos []string) int {
		if len(pos) != 0 || *from == "" || *data == "" {
			fmt.Fprintln(stderr, "usage: taskledger restore --from FILE --data DIR [--key VERIFIER]")
			return 2
		}
		if *led != "" {
			return fail(stderr, "restore writes a bbolt data directory (--data); restoring into a cluster's log (--ledger %s) is done with taskledger migrate from the restored directory", *led)
		}
		if err := backup.CheckTarget(*data); err != nil {
			return fail(stderr, "restore refused: %v", err)
		}
		f, err := os.Open(*from)
		if err != nil {
			return fail(stderr, "restore: %v", err)
		}
		defer f.Close()
		start := time.Now() //tl:wallclock restore duration, reported to the operator
		tmp, err := backup.TempDir(*data)
		if err != nil {
			return fail(stderr, "restore: %v", err)
		}
		m, rep, err := checkArchive(bufio.NewReaderSize(f, 1<<20), tmp, *key,
			projections.Config{IdempotencyRetentionMs: retention.Milliseconds()})
		if err == nil {
			err = backup.Install(tmp, *data)
		}
		if err != nil {
			os.RemoveAll(tmp)
			return fail(stderr, "restore refused, nothing was written to %s: %v", *data, err)
		}
		fmt.Fprintf(stdout, "restored %s into %s: head seq %d (%s), %d blobs, Merkle root %s signed by %s; verify passed (%d events) in %.3fs\n",
			*from, *data, m.HeadSeq, m.HeadHash, len(m.Blobs), m.MerkleRoot, m.Verifier, rep.Events, time.Since(start).Seconds())
		fmt.Fprintln(stdout, "snapshots are not in a backup: the first start replays the whole log")
		return 0
	})
	fs := c.Flags()
	from = fs.String("from", "", "the backup archive to restore")
	data = fs.String("data", "", "the data directory to create (new or empty)")
	key = fs.String("key", "", "the verifier string the backup's checkpoint must be signed by (taskledger checkpoint-key export); default: the key in the archive, printed")
	retention = fs.Duration("idempotency-retention", 72*time.Hour, "idempotency retention the server uses")
	led = fs.String("ledger", "", "refused: a backup restores into a bbolt data directory")
	return c
}

// checkArchive unpacks the archive into tmp and checks it completely.
func checkArchive(r io.Reader, tmp, key string, cfg projections.Config) (*backup.Manifest, *node.VerifyReport, error) {
	m, err := backup.Extract(r, tmp, key)
	if err != nil {
		return nil, nil, err
	}
	store, err := ledger.Open(tmp, ledger.Options{ReadOnly: true})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: the log does not open: %v", backup.ErrDamaged, err)
	}
	defer store.Close()
	rep, err := node.Verify(store, cfg, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("the log fails verify: %w", err)
	}
	var scan *backup.Scan
	if err := store.View(func(v *ledger.View) (err error) { scan, err = backup.ScanView(v, rep.Tree); return err }); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", backup.ErrDamaged, err)
	}
	if err := backup.CheckLog(m, scan); err != nil {
		return nil, nil, err
	}
	return m, rep, nil
}
