package node_test

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"net/http"
	"sync"
	"testing"
	"time"

	"taskledger/ledger"
	"taskledger/ledger/jetstream"
	"taskledger/ledger/jetstream/jstest"
	"taskledger/node"
	"taskledger/node/nodetest"
	"taskledger/projections"
)

// testLeaseTTL keeps the cluster tests short: a dead sequencer's lease
// expires within it.
const testLeaseTTL = 1500 * time.Millisecond

var clusterNames sync.Map

// startNodes starts n taskledger nodes on the cluster, the first one
// alone until it sequences (so it initializes the stream and holds the
// initial admin token), and gives every node that token.
func startNodes(t *testing.T, natsURL string, n int, opts ...nodetest.Option) []*nodetest.Node {
	t.Helper()
	name := fmt.Sprintf("C%d", time.Now().UnixNano()%1e9) //tl:wallclock a fresh stream name per test
	clusterNames.Store(t.Name(), name)
	first := nodetest.StartCluster(t, natsURL, name, t.TempDir(), testLeaseTTL, opts...)
	jstest.Eventually(t, 20*time.Second, "the first node sequences", func() error {
		if first.Role() != "sequencer" {
			return fmt.Errorf("role %q", first.Role())
		}
		return nil
	})
	if first.AdminToken == "" {
		t.Fatal("the node that initialized the stream wrote no initial admin token")
	}
	nodes := []*nodetest.Node{first}
	for i := 1; i < n; i++ {
		nd := nodetest.StartCluster(t, natsURL, name, t.TempDir(), testLeaseTTL, opts...)
		if nd.AdminToken != "" {
			t.Fatalf("node %d also wrote an initial admin token", i)
		}
		nd.AdminToken = first.AdminToken
		nodes = append(nodes, nd)
	}
	for _, nd := range nodes[1:] {
		jstest.Eventually(t, 10*time.Second, "followers know the sequencer", func() error {
			if nd.Sequencer() != first.URL {
				return fmt.Errorf("follower knows %q", nd.Sequencer())
			}
			return nil
		})
	}
	return nodes
}

// idemKeys returns the idempotency keys of every event in the stream.
func idemKeys(t *testing.T, log ledger.Backend) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	if err := log.Range(0, func(e *ledger.Event) error {
		if e.Idem != nil {
			keys[e.Idem.Key] = true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

func createVia(n *nodetest.Node, key string) *nodetest.Resp {
	return n.Try("POST", "/api/v1/admin/tasks", n.AdminToken, map[string]any{"payload": map[string]any{"k": key},
		"authorize": map[string]any{"ttl_seconds": 3600}}, map[string]string{"Idempotency-Key": key})
}

// verifyStream verifies the named stream on a connection of its own. It
// opens with a start timeout, as a node does: after a server's loss the
// resources may answer "no responders" while they elect their leaders.
func verifyStream(t *testing.T, natsURL, name string) *node.VerifyReport {
	t.Helper()
	log, err := jetstream.Open(jetstream.Config{URL: natsURL, Name: name, Replicas: 3, Timeout: 5 * time.Second,
		StartTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	rep, err := node.VerifyBackend(log, projections.Config{IdempotencyRetentionMs: (72 * time.Hour).Milliseconds()})
	if err != nil {
		t.Fatalf("verify the stream: %v", err)
	}
	return rep
}

// TestPausedLeaseHolderCannotAppend: a lease holder stops (paused) and
// still believes it sequences when it wakes, while the node that took the
// expired lease sequences. Its command, decided on its stale state, is
// refused by the stream: answered 503 with Retry-After, never appended;
// it steps down, catches up and forwards. Then both are made to believe
// they sequence at the same head and each gets one command: exactly one
// is appended and answered 2xx, the other is answered 503 and is not in
// the stream.
func TestPausedLeaseHolderCannotAppend(t *testing.T) {
	servers := jstest.Cluster(t)
	url := jstest.URLs(servers)
	nodes := startNodes(t, url, 2)
	a, b := nodes[0], nodes[1]
	nodetest.Must(t, createVia(a, nodetest.NewKey()), http.StatusCreated)
	r := createVia(b, nodetest.NewKey()) // forwarded to a
	nodetest.Must(t, r, http.StatusCreated)
	// A read on the follower right after sees the forwarded write (the
	// read barrier waits for the stream's head).
	nodetest.Must(t, b.Try("GET", "/api/v1/admin/tasks/"+nodetest.Str(r.JSON(), "id"), b.AdminToken, nil, nil), http.StatusOK)
	// A blob stored through a (forwarded from b) is read on b from the
	// cluster's object store.
	img := tinyJPEG(t)
	id := nodetest.Str(r.JSON(), "id")
	nodetest.Must(t, b.Try("PUT", "/api/v1/admin/tasks/"+id+"/reference-image", b.AdminToken, img,
		map[string]string{"Content-Type": "image/jpeg", "Idempotency-Key": nodetest.NewKey()}), http.StatusOK)
	got := b.Try("GET", "/api/v1/admin/tasks/"+id+"/reference-image", b.AdminToken, nil, nil)
	if got.Status != http.StatusOK || !bytes.Equal(got.Body, img) {
		t.Fatalf("reference image read on the follower: %d, %d bytes, want the %d stored", got.Status, len(got.Body), len(img))
	}
	d := a.RegisterDevice()
	depose(t, a, b)
	nodetest.Must(t, createVia(b, nodetest.NewKey()), http.StatusCreated) // the stream moves past a's head

	// A soft-only batch (a presence heartbeat) decided on a's stale state
	// is refused by the head check: 503, nothing written, a steps down.
	if r := d.Ready(); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("a heartbeat to the stale sequencer answered %d %s, want 503", r.Status, r.Body)
	}
	if a.Role() != "follower" {
		t.Fatalf("after the refused soft-only batch a is %q, want follower", a.Role())
	}
	presence := 0
	if err := b.Log.SoftRecords("presence/", func(string, []byte) error { presence++; return nil }); err != nil {
		t.Fatal(err)
	}
	if presence != 0 {
		t.Fatalf("%d presence records written; the refused heartbeat wrote one", presence)
	}
	jstest.Eventually(t, 10*time.Second, "a catches up as a follower", func() error {
		if a.Engine.Head().Seq != b.Engine.Head().Seq {
			return fmt.Errorf("a at %d, b at %d", a.Engine.Head().Seq, b.Engine.Head().Seq)
		}
		return nil
	})
	node.ForceSequencing(a.Node, true)                                    // believes again, its tail stops
	nodetest.Must(t, createVia(b, nodetest.NewKey()), http.StatusCreated) // the stream moves past a's head

	stale := nodetest.NewKey()
	r = createVia(a, stale)
	if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
		t.Fatalf("the stale sequencer answered %d %s (Retry-After %q), want 503 with Retry-After", r.Status, r.Body, r.Header.Get("Retry-After"))
	}
	if idemKeys(t, b.Log)[stale] {
		t.Fatal("the stale sequencer's command is in the stream")
	}
	if a.Role() != "follower" {
		t.Fatalf("after the refused append a is %q, want follower", a.Role())
	}
	node.ForceSequencing(a.Node, false)
	node.PauseLease(a.Node, false)
	jstest.Eventually(t, 10*time.Second, "a follows b", func() error {
		if a.Engine.Head().Seq != b.Engine.Head().Seq || a.Sequencer() != b.URL {
			return fmt.Errorf("a at %d knows %q, b at %d", a.Engine.Head().Seq, a.Sequencer(), b.Engine.Head().Seq)
		}
		return nil
	})
	nodetest.Must(t, createVia(a, stale), http.StatusCreated) // the retry, forwarded, is decided once

	// Both believe they sequence, at the same head.
	jstest.Eventually(t, 10*time.Second, "a catches up", func() error {
		if a.Engine.Head().Seq != b.Engine.Head().Seq {
			return fmt.Errorf("a at %d, b at %d", a.Engine.Head().Seq, b.Engine.Head().Seq)
		}
		return nil
	})
	node.PauseLease(a.Node, true) // else its next renewal, at a lost revision, steps it down
	node.ForceSequencing(a.Node, true)
	keys := [2]string{nodetest.NewKey(), nodetest.NewKey()}
	var answers [2]*nodetest.Resp
	var wg sync.WaitGroup
	for i, n := range []*nodetest.Node{a, b} {
		wg.Add(1)
		go func() { defer wg.Done(); answers[i] = createVia(n, keys[i]) }()
	}
	wg.Wait()
	node.ForceSequencing(a.Node, false)
	node.PauseLease(a.Node, false)
	in := idemKeys(t, b.Log)
	won := 0
	for i, ans := range answers {
		switch {
		case ans.Status == http.StatusCreated && in[keys[i]]:
			won++
		case ans.Status == http.StatusServiceUnavailable && !in[keys[i]]:
		default:
			t.Errorf("node %d answered %d %s; in the stream: %v", i, ans.Status, ans.Body, in[keys[i]])
		}
	}
	if won != 1 {
		t.Fatalf("%d of the two commands decided at the same head were appended, want exactly 1", won)
	}
	rep := verifyStream(t, url, mustName(t))
	if h, err := b.Log.Head(); err != nil || rep.Head.Seq != h.Seq {
		t.Fatalf("verified head %d, stream head %d (%v)", rep.Head.Seq, h.Seq, err)
	}
}

// depose waits for follower b to reach sequencer a, then pauses a's lease
// loop while a goes on believing it sequences, until b takes the expired
// lease.
func depose(t *testing.T, a, b *nodetest.Node) {
	t.Helper()
	jstest.Eventually(t, 10*time.Second, "b follows a", func() error {
		if b.Engine.Head().Seq != a.Engine.Head().Seq {
			return fmt.Errorf("b at %d, a at %d", b.Engine.Head().Seq, a.Engine.Head().Seq)
		}
		return nil
	})
	node.PauseLease(a.Node, true)
	node.ForceSequencing(a.Node, true)
	jstest.Eventually(t, 10*time.Second, "b takes the expired lease", func() error {
		if b.Role() != "sequencer" {
			return fmt.Errorf("b is %q", b.Role())
		}
		return nil
	})
}

func mustName(t *testing.T) string {
	v, ok := clusterNames.Load(t.Name())
	if !ok {
		t.Fatal("no stream name")
	}
	return v.(string)
}

// TestOpenClusterRefusesANodeWithoutAdvertisedURL: a node nobody can
// forward to cannot sequence.
func TestOpenClusterRefusesANodeWithoutAdvertisedURL(t *testing.T) {
	s := jstest.Server(t, false)
	log, err := jetstream.Open(jetstream.Config{URL: s.ClientURL(), Name: "REFUSE"})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	if _, err := node.OpenCluster(node.Config{DataDir: t.TempDir()}, node.ClusterConfig{Log: log}); err == nil {
		t.Fatal("a node without an advertised URL opened")
	}
}

// TestClusterNodeStartsFromItsSnapshotAndTheTail: a node's snapshots are
// its own (in its data directory, from its projections); restarted, it
// loads the newest one and replays only the stream after it.
func TestClusterNodeStartsFromItsSnapshotAndTheTail(t *testing.T) {
	servers := jstest.Cluster(t)
	url := jstest.URLs(servers)
	a := startNodes(t, url, 1)[0]
	for i := 0; i < 3; i++ {
		nodetest.Must(t, createVia(a, nodetest.NewKey()), http.StatusCreated)
	}
	if _, err := a.Snapshot(); err != nil {
		t.Fatal(err)
	}
	snapSeq := a.Engine.Head().Seq
	for i := 0; i < 2; i++ {
		nodetest.Must(t, createVia(a, nodetest.NewKey()), http.StatusCreated)
	}
	head := a.Engine.Head().Seq
	dir, admin := a.Dir, a.AdminToken
	a.Close()
	b := nodetest.StartCluster(t, url, mustName(t), dir, testLeaseTTL)
	if b.Loaded.Snapshot == nil || b.Loaded.Snapshot.Seq != snapSeq || b.Loaded.Replayed != head-snapSeq {
		t.Fatalf("loaded %+v, want the snapshot at %d and a tail of %d", b.Loaded, snapSeq, head-snapSeq)
	}
	if b.AdminToken != admin {
		t.Fatal("the restarted node rewrote initial-admin-token")
	}
	if b.Engine.Head().Seq != head {
		t.Fatalf("head %d, want %d", b.Engine.Head().Seq, head)
	}
}

// tinyJPEG is a real 8×8 JPEG.
func tinyJPEG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for i := range img.Pix {
		img.Pix[i] = uint8(i)
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestLinearizableOnACluster runs the linearizability workload of
// linearizability_test.go with its 32 clients spread over three nodes of a
// cluster (commands to followers forwarded to the sequencer), on the manual
// test clock, and checks the history with porcupine.
func TestLinearizableOnACluster(t *testing.T) {
	servers := jstest.Cluster(t)
	manual := func(c *node.Config) { c.Manual = true }
	nodes := startNodes(t, jstest.URLs(servers), 3, linConfig, manual)
	seed := uint64(time.Now().UnixNano()) //tl:wallclock the workload's seed
	t.Logf("seed %d, %d operations", seed, *linOps)
	began := time.Now() //tl:wallclock recording time
	history, m := recordHistoryOn(t, nodes[0], []string{nodes[0].URL, nodes[1].URL, nodes[2].URL}, *linOps, seed)
	checkLinearizable(t, history, m, time.Since(began))
	verifyStream(t, jstest.URLs(servers), mustName(t))
}

// TestDeposedHolderDoesNotAcknowledgeAQuietHeartbeat: a paused holder that
// still believes it sequences after another node took the lease, before
// that node appended anything (the stream's head is unchanged), must not
// answer 2xx for a quiet heartbeat: its soft lease record is written after
// the new sequencer loaded the soft records, so the new sequencer would
// not know the extension it acknowledged.
func TestDeposedHolderDoesNotAcknowledgeAQuietHeartbeat(t *testing.T) {
	servers := jstest.Cluster(t)
	nodes := startNodes(t, jstest.URLs(servers), 2)
	a, b := nodes[0], nodes[1]
	run := a.StartTask(t, a.RegisterDevice(), map[string]any{"k": 1})
	nodetest.Must(t, run.Beat("s"), http.StatusOK) // a new step: an event
	depose(t, a, b)
	if r := run.Beat("s"); r.Status != http.StatusServiceUnavailable { // the same step: soft only
		t.Fatalf("a quiet heartbeat to the deposed holder answered %d %s, want 503", r.Status, r.Body)
	}
	if a.Role() != "follower" {
		t.Fatalf("after the refused quiet heartbeat a is %q, want follower", a.Role())
	}
	node.ForceSequencing(a.Node, false)
	node.PauseLease(a.Node, false)
}
