package node_test

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"taskledger/api"
	"taskledger/audit/checkpoint"
	"taskledger/audit/merkle"
	"taskledger/audit/transparency"
	"taskledger/ledger"
	"taskledger/node"
	"taskledger/node/nodetest"
	"taskledger/projections"
)

func someEvents(n *nodetest.Node, tasks int) {
	for range tasks {
		n.CreateTask(map[string]any{"kind": "demo"})
	}
}

// TestRebuiltTreeEqualsTheIncrementalOne: the tree grown commit by commit
// equals the one rebuilt from the log at the next start, and its root is
// the one of the stored checkpoint.
func TestRebuiltTreeEqualsTheIncrementalOne(t *testing.T) {
	n := nodetest.Start(t)
	someEvents(n, 7)
	live := n.Transparency.Tree()
	var head uint64
	if h, err := n.Store.Head(); err == nil {
		head = h.Seq
	}
	if live.Size() != head || head == 0 {
		t.Fatalf("tree has %d leaves, log %d events", live.Size(), head)
	}
	re, err := transparency.Build(n.Store)
	if err != nil {
		t.Fatal(err)
	}
	if !re.Equal(live) {
		t.Fatal("the tree rebuilt from the log differs from the incremental one")
	}
	n2 := n.Restart()
	if !n2.Transparency.Tree().Equal(live) {
		t.Fatal("the tree after restart differs from the incremental one")
	}
}

// TestCheckpointIsServedWithoutTokenAndVerifies: the latest checkpoint is
// signed by the node's key, covers every committed event once the clock
// moved a second, and is kept by size.
func TestCheckpointIsServedWithoutTokenAndVerifies(t *testing.T) {
	n := nodetest.Start(t)
	r := n.Do("GET", "/api/v1/checkpoint", "", nil, nil)
	if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("checkpoint of an empty log: %d %s", r.Status, r.Body)
	}
	cp, err := checkpoint.Open(r.Body, n.Transparency.Key().Verifier())
	if err != nil || cp.Size != 0 {
		t.Fatalf("empty checkpoint: %v %+v", err, cp)
	}
	someEvents(n, 3)
	size := n.Transparency.Tree().Size()
	signed, err := n.Transparency.Sign()
	if err != nil {
		t.Fatal(err)
	}
	r = n.Do("GET", "/api/v1/checkpoint", "", nil, nil)
	if string(r.Body) != string(signed) {
		t.Fatalf("latest checkpoint is not the newest signed:\n%s", r.Body)
	}
	cp, err = checkpoint.Open(r.Body, n.Transparency.Key().Verifier())
	if err != nil {
		t.Fatal(err)
	}
	root, _ := n.Transparency.Tree().Root(size)
	if cp.Size != size || string(cp.Root) != string(root) || cp.Time != n.Engine.Manual().Now().UnixMilli() {
		t.Fatalf("checkpoint %+v, tree size %d", cp, size)
	}
	if r := n.Do("GET", "/api/v1/checkpoint?size=0", "", nil, nil); r.Status != 400 || r.Code() != "invalid_proof_parameter" {
		t.Fatalf("size=0: %d %s", r.Status, r.Body)
	}
	if r := n.Do("GET", "/api/v1/checkpoint?size=999", "", nil, nil); r.Status != 404 || r.Code() != "checkpoint_not_found" {
		t.Fatalf("size=999: %d %s", r.Status, r.Body)
	}
	if r := n.Do("GET", "/api/v1/checkpoint?size="+itoa(size), "", nil, nil); r.Status != 200 || string(r.Body) != string(signed) {
		t.Fatalf("by size: %d %s", r.Status, r.Body)
	}
}

// TestCheckpointsAfterCommitsAreRateLimitedByTheClock: a commit within a
// second of the last checkpoint signs none; once the test clock moved a
// second, the next commit is covered by a new checkpoint.
func TestCheckpointsAfterCommitsAreRateLimitedByTheClock(t *testing.T) {
	n := nodetest.Start(t)
	someEvents(n, 1)
	first, _, _ := n.Transparency.Latest()
	if first != 0 { // the start signed size 0 at this clock second: the commit waits
		t.Fatalf("a commit within the second of the last checkpoint was signed at once (size %d)", first)
	}
	n.Advance(2 * time.Second)
	someEvents(n, 1)
	want := n.Transparency.Tree().Size()
	deadline := time.After(10 * time.Second)
	for {
		size, _, err := n.Transparency.Latest()
		if err == nil && size == want {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("no checkpoint of size %d (latest %d, first %d)", want, size, first)
		case <-time.After(20 * time.Millisecond): // the signer's tick is the signal; bounded by the deadline
		}
	}
}

func decodeProof(t *testing.T, r *nodetest.Resp, v any) {
	t.Helper()
	if r.Status != 200 {
		t.Fatalf("proof: %d %s", r.Status, r.Body)
	}
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatal(err)
	}
}

func TestInclusionAndConsistencyProofsOverTheAPI(t *testing.T) {
	n := nodetest.Start(t)
	someEvents(n, 5)
	size := n.Transparency.Tree().Size()
	if _, err := n.Transparency.Sign(); err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= size; seq++ {
		var p api.InclusionProofJSON
		decodeProof(t, n.Do("GET", "/api/v1/admin/proofs/inclusion?seq="+itoa(seq), n.AdminToken, nil, nil), &p)
		if p.TreeSize != size || p.Checkpoint == nil {
			t.Fatalf("default size: %+v", p)
		}
		cp, err := checkpoint.Open([]byte(*p.Checkpoint), n.Transparency.Key().Verifier())
		if err != nil {
			t.Fatal(err)
		}
		var raw []byte
		_ = n.Store.RangeRaw(seq-1, func(s uint64, b []byte) error { raw = append([]byte(nil), b...); return errStop })
		if base64.StdEncoding.EncodeToString(merkle.LeafHash(raw)) != base64.StdEncoding.EncodeToString(p.LeafHash) {
			t.Fatalf("seq %d: leaf hash is not the hash of the stored event", seq)
		}
		if err := merkle.VerifyInclusion(seq, size, p.LeafHash, p.Hashes, cp.Root); err != nil {
			t.Fatalf("seq %d: %v", seq, err)
		}
	}
	for from := uint64(1); from <= size; from++ {
		var p api.ConsistencyProofJSON
		decodeProof(t, n.Do("GET", "/api/v1/admin/proofs/consistency?from="+itoa(from)+"&to="+itoa(size), n.AdminToken, nil, nil), &p)
		if err := merkle.VerifyConsistency(from, size, p.Hashes, p.FromRoot, p.ToRoot); err != nil {
			t.Fatalf("%d→%d: %v", from, size, err)
		}
	}
}

func TestProofRoutesRefuseBadParameters(t *testing.T) {
	n := nodetest.Start(t)
	someEvents(n, 2)
	size := n.Transparency.Tree().Size()
	beyond := itoa(size + 1)
	cases := []struct {
		path, token string
		status      int
		code        string
	}{
		{"/api/v1/admin/proofs/inclusion?seq=1", "", 401, ""},
		{"/api/v1/admin/proofs/inclusion", "admin", 400, "invalid_proof_parameter"},
		{"/api/v1/admin/proofs/inclusion?seq=abc", "admin", 400, "invalid_proof_parameter"},
		{"/api/v1/admin/proofs/inclusion?seq=0", "admin", 400, "invalid_proof_parameter"},
		{"/api/v1/admin/proofs/inclusion?seq=01", "admin", 400, "invalid_proof_parameter"},
		{"/api/v1/admin/proofs/inclusion?seq=-1", "admin", 400, "invalid_proof_parameter"},
		{"/api/v1/admin/proofs/inclusion?seq=1&seq=2", "admin", 400, "ambiguous_request"},
		{"/api/v1/admin/proofs/inclusion?seq=1&other=2", "admin", 400, "invalid_proof_parameter"},
		{"/api/v1/admin/proofs/inclusion?seq=99999999999999999999", "admin", 400, "invalid_proof_parameter"},
		{"/api/v1/admin/proofs/inclusion?seq=2&size=1", "admin", 400, "proof_range_invalid"},
		{"/api/v1/admin/proofs/inclusion?seq=1&size=" + beyond, "admin", 404, "tree_size_unknown"},
		{"/api/v1/admin/proofs/consistency?from=1", "admin", 400, "invalid_proof_parameter"},
		{"/api/v1/admin/proofs/consistency?to=1", "admin", 400, "invalid_proof_parameter"},
		{"/api/v1/admin/proofs/consistency?from=0&to=1", "admin", 400, "invalid_proof_parameter"},
		{"/api/v1/admin/proofs/consistency?from=2&to=1", "admin", 400, "proof_range_invalid"},
		{"/api/v1/admin/proofs/consistency?from=1&to=" + beyond, "admin", 404, "tree_size_unknown"},
		{"/api/v1/checkpoint?size=x", "", 400, "invalid_proof_parameter"},
		{"/api/v1/checkpoint?other=1", "", 400, "invalid_proof_parameter"},
	}
	for _, c := range cases {
		tok := c.token
		if tok == "admin" {
			tok = n.AdminToken
		}
		r := n.Do("GET", c.path, tok, nil, nil)
		if r.Status != c.status || (c.code != "" && r.Code() != c.code) {
			t.Errorf("%s: %d %s, want %d %s", c.path, r.Status, r.Body, c.status, c.code)
		}
	}
}

var errStop = ledger.ErrStop

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

// TestVerifyChecksStoredCheckpointsAgainstTheRebuiltTree: verify rebuilds
// the tree; a stored checkpoint of another key, or of a root the log does
// not have, fails it.
func TestVerifyChecksStoredCheckpointsAgainstTheRebuiltTree(t *testing.T) {
	n := nodetest.Start(t)
	someEvents(n, 3)
	if _, err := n.Transparency.Sign(); err != nil {
		t.Fatal(err)
	}
	size := n.Transparency.Tree().Size()
	n.Close()
	verify := func() error {
		store, err := ledger.Open(n.Dir, ledger.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		rep, err := node.Verify(store, projections.Config{IdempotencyRetentionMs: (72 * time.Hour).Milliseconds()}, nil)
		if err == nil && (rep.Checkpoints < 2 || rep.Tree.Size() != size) {
			t.Fatalf("verify checked %d checkpoints, tree of %d", rep.Checkpoints, rep.Tree.Size())
		}
		return err
	}
	if err := verify(); err != nil {
		t.Fatalf("intact ledger: %v", err)
	}
	key, err := checkpoint.LoadKey(n.Dir)
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := checkpoint.LoadOrCreateKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := mustOpen(t, n.Dir)
	rebuilt, _ := transparency.Build(st)
	st.Close()
	good, _ := rebuilt.Root(size)
	forged := map[string][]byte{}
	forged["another key"], _ = other.Sign(checkpoint.Checkpoint{Size: size, Root: good, Time: 1})
	forged["another root"], _ = key.Sign(checkpoint.Checkpoint{Size: size, Root: make([]byte, 32), Time: 1})
	for name, note := range forged {
		store := mustOpen(t, n.Dir)
		if err := store.PutCheckpoint(size, note); err != nil {
			t.Fatal(err)
		}
		store.Close()
		if err := verify(); err == nil || !strings.Contains(err.Error(), "checkpoint") {
			t.Errorf("%s: verify passed or failed for another reason: %v", name, err)
		}
	}
}

func mustOpen(t *testing.T, dir string) *ledger.Store {
	t.Helper()
	s, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
