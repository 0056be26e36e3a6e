//go:build failpoints

package api_test

import (
	"net/http"
	"testing"

	"taskledger/api"
	"taskledger/internal/failpoint"
	"taskledger/ledger"
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
	mustNotReady(t, n, api.NotReadyStorageFailed)
	restore()
	nodetest.Must(t, n.Do("GET", "/readyz", "", nil, nil), http.StatusOK)
	nodetest.Must(t, put(), http.StatusOK)
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
