//go:build failpoints

package node_test

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"

	"taskledger/audit/checkpoint"
	"taskledger/internal/durable"
	"taskledger/internal/failpoint"
	"taskledger/ledger"
	"taskledger/node"
	"taskledger/node/nodetest"
)

// cutAt makes the next start fail at point (its first side-file write),
// then tears what a power cut at that step could lose: the .tmp file's
// unsynced content before its fsync.
func cutAt(t *testing.T, dir, point string) {
	t.Helper()
	disable, err := failpoint.Enable(point, "eio")
	if err != nil {
		t.Fatal(err)
	}
	nd, err := openAt(dir)
	disable()
	if err == nil {
		nd.Close()
		t.Fatalf("start passed the failpoint %s", point)
	}
	if point != failpoint.SideFileWritten {
		return
	}
	tmps, _ := filepath.Glob(filepath.Join(dir, "*"+durable.TmpSuffix))
	for _, tmp := range tmps {
		if fi, err := os.Stat(tmp); err == nil {
			if err := os.Truncate(tmp, fi.Size()/2); err != nil {
				t.Fatal(err)
			}
		}
	}
}

var sideFileSteps = []string{failpoint.SideFileWritten, failpoint.SideFileSynced, failpoint.SideFileRenamed}

// A start cut at each step of its head record write leaves a log that
// starts, with every acknowledged command.
func TestHeadWriteCutAtEachStepKeepsTheLog(t *testing.T) {
	for _, point := range sideFileSteps {
		t.Run(point, func(t *testing.T) {
			n := nodetest.Start(t)
			id := n.CreateTask(nil)
			head := n.Head()
			n.Close()
			cutAt(t, n.Dir, point)
			n = nodetest.Start(t, nodetest.WithDir(n.Dir))
			if got := n.Head(); got != head {
				t.Fatalf("restarted at seq %d, want %d", got, head)
			}
			if r := n.Do("GET", "/api/v1/admin/tasks/"+id, n.AdminToken, nil, nil); r.Status != 200 {
				t.Fatalf("the acknowledged task is gone: %d", r.Status)
			}
		})
	}
}

// A first start cut at each step of the initial token's write never leaves
// an active hash without its token: the next start's token works.
func TestInitialTokenWriteCutAtEachStepLeavesAWorkingToken(t *testing.T) {
	for _, point := range sideFileSteps {
		t.Run(point, func(t *testing.T) {
			dir := t.TempDir()
			cutAt(t, dir, point)
			n := nodetest.Start(t, nodetest.WithDir(dir))
			if n.AdminToken == "" {
				t.Fatal("the initial admin token file is empty")
			}
			if r := n.Do("GET", "/api/v1/admin/tasks", n.AdminToken, nil, nil); r.Status != 200 {
				t.Fatalf("the initial token does not work: %d", r.Status)
			}
		})
	}
}

// A first start cut at each step of the checkpoint key's write (after the
// initial token was set up) leaves a whole key or none: the next start
// signs with a whole key a checkpoint that opens with it.
func TestCheckpointKeyWriteCutAtEachStepLeavesAWholeKey(t *testing.T) {
	for _, point := range sideFileSteps {
		t.Run(point, func(t *testing.T) {
			dir := t.TempDir()
			st, err := ledger.Open(dir, ledger.Options{})
			if err != nil {
				t.Fatal(err)
			}
			tok := "tl_admin_cutkeytest"
			h := sha256.Sum256([]byte(tok))
			err = st.PutAdminToken("initial", h[:])
			st.Close()
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, node.InitialTokenFile), []byte(tok+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			cutAt(t, dir, point) // the key is this start's first side file
			n := nodetest.Start(t, nodetest.WithDir(dir))
			key, err := checkpoint.LoadKey(n.Dir)
			if err != nil {
				t.Fatalf("the key after the cut: %v", err)
			}
			_, signed, err := n.Transparency.Latest()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := checkpoint.Open(signed, key.Verifier()); err != nil {
				t.Fatalf("the latest checkpoint does not open with the key: %v", err)
			}
		})
	}
}
