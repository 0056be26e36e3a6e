package api_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"taskledger/ledger"
	"taskledger/node"
	"taskledger/node/nodetest"
	"taskledger/projections"
)

func mustUnavailable(t *testing.T, what string, r *nodetest.Resp) {
	t.Helper()
	if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" || len(r.Body) != 0 {
		t.Fatalf("%s: %d %q (Retry-After %q), want 503 with Retry-After and an empty body", what, r.Status, r.Body, r.Header.Get("Retry-After"))
	}
}

// A blob damaged on disk is never served (its hash is re-checked on every
// read), and verify reports it.
func TestDamagedBlobIsNotServedAndVerifyReportsIt(t *testing.T) {
	n := nodetest.Start(t)
	id := n.CreateTask(map[string]any{"k": "v"})
	jpeg := tinyJPEG(t, 9)
	nodetest.Must(t, n.Raw(t, "PUT", nodetest.AdminPath+"/tasks/"+id+"/reference-image", n.AdminToken, jpeg, false,
		map[string]string{"Content-Type": "image/jpeg", "Idempotency-Key": nodetest.NewKey()}),
		http.StatusOK)
	nodetest.Must(t, n.Authorize(id, nodetest.Num(n.Task(id), "revision"), time.Hour), http.StatusOK)
	sha := nodetest.Str(n.Task(id)["reference_image"].(map[string]any), "sha256")
	path := filepath.Join(n.Dir, "blobs", sha)
	damaged := append([]byte(nil), jpeg...)
	damaged[len(damaged)/2] ^= 0xff
	if err := os.WriteFile(path, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	d := n.ReadyDevice(t)
	tid, tok, claim := d.MustClaim(t)
	gen := fmt.Sprint(nodetest.Num(claim.JSON(), "claim_generation"))
	get := func() *nodetest.Resp {
		return n.Raw(t, "GET", nodetest.DevicePath+"/tasks/"+tid+"/reference-image", d.Token, nil, false,
			map[string]string{"X-Claim-Token": tok, "X-Claim-Generation": gen})

	}
	adminGet := func() *nodetest.Resp {
		return n.Do("GET", nodetest.AdminPath+"/tasks/"+id+"/reference-image", n.AdminToken, nil, nil)
	}
	// Damaged, then missing: 503 with Retry-After and an empty body (a
	// storage fault, never a 500, never the bytes), on both routes.
	mustUnavailable(t, "device read of a damaged blob", get())
	mustUnavailable(t, "admin read of a damaged blob", adminGet())
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	mustUnavailable(t, "device read of a missing blob", get())
	mustUnavailable(t, "admin read of a missing blob", adminGet())
	if err := os.WriteFile(path, jpeg, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := get(); r.Status != http.StatusOK || !bytes.Equal(r.Body, jpeg) {
		t.Fatalf("the repaired blob: %d", r.Status)
	}
	n.Close()
	os.WriteFile(path, damaged, 0o600)
	store, err := ledger.Open(n.Dir, ledger.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := node.Verify(store, projections.Config{IdempotencyRetentionMs: 72 * 3600 * 1000}, nil); !errors.Is(err, ledger.ErrBlobDamaged) {
		t.Fatalf("verify with a damaged blob: %v, want ErrBlobDamaged", err)
	}
	os.Truncate(path, 10)
	if _, err := node.Verify(store, projections.Config{IdempotencyRetentionMs: 72 * 3600 * 1000}, nil); !errors.Is(err, ledger.ErrBlobDamaged) {
		t.Fatalf("verify with a short blob: %v, want ErrBlobDamaged", err)
	}
}
