package node_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"taskledger/backup"
	"taskledger/node"
	"taskledger/node/nodetest"
)

type backupInterval struct {
	path string
	err  error
}

// A node with --backup-dir writes an archive of each new head, skips an
// interval with nothing new, and keeps only the newest --backup-keep.
func TestScheduledBackupsFollowTheHeadAndKeepTheNewest(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "backups")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// Every interval is reported, in order: a dropped report would let the
	// test act on a stale one (an archive renamed into place but not yet
	// pruned). The scheduler waits for the test to read, until the test ends.
	got, stop := make(chan backupInterval), make(chan struct{})
	n := nodetest.Start(t, func(c *node.Config) {
		c.BackupDir, c.BackupEvery, c.BackupKeep = dir, time.Millisecond, 2
		c.BackupWritten = func(path string, err error) {
			select {
			case got <- backupInterval{path, err}:
			case <-stop:
			}
		}
	})
	t.Cleanup(func() { close(stop) }) // runs before the node's close
	// waitFor reads intervals until one wrote the archive of head seq.
	waitFor := func(seq uint64) {
		t.Helper()
		want := filepath.Join(dir, backup.FileName(seq))
		for w := range got {
			if w.err != nil {
				t.Fatalf("scheduled backup: %v", w.err)
			}
			if w.path == want {
				return
			}
		}
	}
	for range 3 {
		n.CreateTask(map[string]any{"a": 1})
		waitFor(n.Head())
	}
	for w := range got { // an interval with nothing new writes nothing
		if w.err != nil {
			t.Fatal(w.err)
		}
		if w.path == "" {
			break
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != 2 || names[1] != backup.FileName(n.Head()) || names[0] != backup.FileName(n.Head()-1) {
		t.Fatalf("backup dir holds %v, want the two newest archives ending at head %d", names, n.Head())
	}
	f, err := os.Open(filepath.Join(dir, names[1]))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := backup.Extract(f, t.TempDir(), n.Transparency.Key().Verifier())
	if err != nil || m.HeadSeq != n.Head() {
		t.Fatalf("the newest scheduled archive: %v, head %v", err, m)
	}
	if strings.Contains(strings.Join(names, " "), ".partial") {
		t.Fatalf("partial files left: %v", names)
	}
}
