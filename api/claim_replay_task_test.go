package api_test

import (
	"net/http"
	"testing"

	"taskledger/node/nodetest"
)

// The task part of a claim answer (payload, revision, created_at,
// reference_image_url) is not kept in the idempotency record but read from
// the task when answering (commands.ClaimedTask): a replay is byte for byte
// the first answer, live and after a restart from a snapshot, and once the
// claim is closed and the task amended the replay is refused, never
// answered with the new payload.
func TestClaimReplayReadsTheClaimedTask(t *testing.T) {
	n := nodetest.Start(t)
	d := n.RegisterDevice()
	nodetest.Must(t, d.Ready(), http.StatusOK)
	id := n.CreateTask(map[string]any{"v": 1})
	nodetest.Must(t, putReferenceImage(n, id, tinyJPEG(t, 3), nodetest.NewKey()), http.StatusOK)
	nodetest.Must(t, n.Do("POST", nodetest.AdminPath+"/tasks/"+id+"/authorize", n.AdminToken,
		map[string]any{"expected_revision": 2, "ttl_seconds": 3600}, nil), http.StatusOK)

	key, tok := nodetest.NewKey(), nodetest.NewClaimToken()
	first := d.ClaimWith(key, tok)
	nodetest.Must(t, first, http.StatusOK)
	task := first.JSON()["task"].(map[string]any)
	if nodetest.Num(task, "revision") != 2 || nodetest.Str(task, "reference_image_url") == "" ||
		task["payload"].(map[string]any)["v"] != float64(1) {
		t.Fatalf("claim answer: %s", first.Body)
	}
	nodetest.MustReplay(t, first, d.ClaimWith(key, tok))

	if _, err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	n = n.Restart()
	if n.Loaded.Snapshot == nil {
		t.Fatal("the restart did not load the snapshot")
	}
	d.N = n
	nodetest.MustReplay(t, first, d.ClaimWith(key, tok))

	n.Advance(n.Engine.Config().ClaimLease) // the claim lease expires; amend closes the stale claim
	nodetest.Must(t, n.Do("POST", nodetest.AdminPath+"/tasks/"+id+"/amend", n.AdminToken,
		map[string]any{"expected_revision": 2, "payload": map[string]any{"v": 2}}, nil), http.StatusOK)
	nodetest.MustError(t, d.ClaimWith(key, tok), http.StatusConflict, "claim_replay_expired")
}
