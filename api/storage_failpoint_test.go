//go:build failpoints

package api_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"

	"taskledger/commands"
	"taskledger/internal/failpoint"
	"taskledger/ledger"
	"taskledger/node"
	"taskledger/node/nodetest"
)

// mustFailpoint enables a failpoint until the test ends.
func mustFailpoint(t *testing.T, name, act string) (disable func()) {
	t.Helper()
	disable, err := failpoint.Enable(name, act)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(disable)
	return disable
}

// faultyLog fails every append with ENOSPC while full is set.
type faultyLog struct {
	inner commands.Log
	full  atomic.Bool
}

func (l *faultyLog) Append(b *ledger.Batch) error {
	if l.full.Load() {
		return fmt.Errorf("bbolt commit: %w", syscall.ENOSPC)
	}
	return l.inner.Append(b)
}

// A blob write that fails (disk full) answers 503 with Retry-After, never
// 500, appends nothing, and /readyz is 503 until the data directory takes
// writes again; then the same upload succeeds without a restart.
func TestBlobWriteFailureAnswers503AndRecovers(t *testing.T) {
	n := nodetest.Start(t)
	id := n.CreateTask(map[string]any{"k": "v"})
	jpeg := tinyJPEG(t, 3)
	key := nodetest.NewKey()
	put := func() *nodetest.Resp {
		return n.Raw(t, "PUT", nodetest.AdminPath+"/tasks/"+id+"/reference-image", n.AdminToken, jpeg, false,
			map[string]string{"Content-Type": "image/jpeg", "Idempotency-Key": key})

	}
	before := n.Head()
	restore := mustFailpoint(t, failpoint.BlobWrite, "enospc")
	mustUnavailable(t, "upload on a full disk", put())
	n.MustUnchanged(t, before)
	mustUnavailable(t, "readyz on a full disk", n.Do("GET", "/readyz", "", nil, nil))
	restore()
	nodetest.Must(t, n.Do("GET", "/readyz", "", nil, nil), http.StatusOK)
	nodetest.Must(t, put(), http.StatusOK)
}

// A commit that fails with ENOSPC answers 503 with Retry-After; /readyz is
// 503 while commits fail; once the disk takes writes, commands are
// accepted again without a restart, nothing acknowledged is lost, and
// presence is not lost either.
func TestCommitFailureAnswers503AndRecovers(t *testing.T) {
	fl := &faultyLog{}
	n := nodetest.Start(t, func(c *node.Config) {
		c.WrapLog = func(l commands.Log) commands.Log { fl.inner = l; return fl }
	})
	acked := n.CreateTask(map[string]any{"n": 1})
	d := n.ReadyDevice(t)
	fl.full.Store(true)
	restore := mustFailpoint(t, failpoint.BlobWrite, "enospc") // the disk is full for the probe too
	r := n.Do("POST", nodetest.AdminPath+"/tasks", n.AdminToken, map[string]any{"payload": map[string]any{"n": 2}}, nil)
	mustUnavailable(t, "create on a full disk", r)
	mustUnavailable(t, "readyz on a full disk", n.Do("GET", "/readyz", "", nil, nil))
	fl.full.Store(false)
	restore()
	nodetest.Must(t, n.Do("GET", "/readyz", "", nil, nil), http.StatusOK)
	if st, _ := n.State(acked); st != "PENDING" {
		t.Fatalf("acknowledged task lost: state %q", st)
	}
	// The device's presence survived the failed commit: it claims at once.
	_, _, claim := d.MustClaim(t)
	nodetest.Must(t, claim, http.StatusOK)
}

// A blob that cannot be written (ENOSPC at the start, or in the middle of
// the body) answers 503 and leaves nothing in blobs/.
func TestUploadStorageErrorLeavesNothing(t *testing.T) {
	l := driveTo(t, stRunning)
	n := l.n
	big := padPNG(t, tinyPNG(t), 1<<20)
	restore := mustFailpoint(t, failpoint.BlobWrite, "enospc")
	mustUnavailable(t, "blob fault at create", l.evidence(t, "", big, nil))
	restore()
	mustBlobs(t, n, "fault at create")
	stages := watchBlobs(n)
	stages.at[ledger.BlobCreated] = func() { restore = mustFailpoint(t, failpoint.BlobWrite, "eio") }
	mustUnavailable(t, "blob fault mid-body", l.evidence(t, "", big, nil))
	restore()
	stages.wait(t, ledger.BlobAborted)
	mustBlobs(t, n, "fault mid-body")
	mustUploaded(t, l.evidence(t, "", big, nil), big)
	mustBlobs(t, n, "after recovery", sha256Hex(big))
}
