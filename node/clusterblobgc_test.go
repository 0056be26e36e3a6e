package node_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"taskledger/ledger/jetstream"
	"taskledger/ledger/jetstream/jstest"
	"taskledger/node"
	"taskledger/node/nodetest"
)

// storedBlobs is the set of blobs in the cluster's object store.
func storedBlobs(t *testing.T, n *nodetest.Node) map[string]bool {
	t.Helper()
	bs, err := n.Log.(*jetstream.Log).Blobs()
	if err != nil {
		t.Fatal(err)
	}
	list, err := bs.List()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, b := range list {
		out[b.Name] = true
	}
	return out
}

// TestClusterBlobCollectionSparesEveryCommittedBlob: reference images
// uploaded through the follower (their events committed by the
// sequencer), one of them since replaced (named by an event only), and an
// orphan put in the object store by nobody's event. A round on the
// follower is refused and removes nothing; a round on the sequencer
// removes the orphan only, and a young orphan (stored less than the grace
// ago) is spared. After a failover the new sequencer's round (at its
// promotion) keeps every blob the old sequencer's events named, and they
// are still served.
func TestClusterBlobCollectionSparesEveryCommittedBlob(t *testing.T) {
	servers := jstest.Cluster(t)
	url := jstest.URLs(servers)
	rounds := make(chan error, 16)
	nodes := startNodes(t, url, 2, func(c *node.Config) {
		c.BlobGrace = time.Nanosecond
		c.BlobsCollected = func(_ node.BlobsCollected, err error) { rounds <- err }
	})
	a, b := nodes[0], nodes[1]
	r := createVia(b, nodetest.NewKey())
	nodetest.Must(t, r, http.StatusCreated)
	id := nodetest.Str(r.JSON(), "id")
	img1, img2 := gcImage(t, 1, false), gcImage(t, 2, false)
	for _, img := range [][]byte{img1, img2} {
		nodetest.Must(t, b.Try("PUT", "/api/v1/admin/tasks/"+id+"/reference-image", b.AdminToken, img,
			map[string]string{"Content-Type": "image/jpeg", "Idempotency-Key": nodetest.NewKey()}), http.StatusOK)
	}
	shared, err := a.Log.(*jetstream.Log).Blobs()
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := shared.Put([]byte("no event names this"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := node.CollectBlobs(b.Node, 0); !errors.Is(err, node.ErrNotSequencer) {
		t.Fatalf("a round on the follower: %v, want ErrNotSequencer", err)
	}
	if !storedBlobs(t, a)[orphan] {
		t.Fatal("the follower's refused round removed a blob")
	}
	res, err := node.CollectBlobs(a.Node, time.Hour)
	if err != nil || res.Removed != 0 || !storedBlobs(t, a)[orphan] {
		t.Fatalf("a round with a grace of an hour: %+v %v; the orphan stored now must stay", res, err)
	}
	res, err = node.CollectBlobs(a.Node, time.Nanosecond)
	if err != nil {
		t.Fatal(err)
	}
	got := storedBlobs(t, a)
	if res.Removed != 1 || got[orphan] || !got[gcSHA(img1)] || !got[gcSHA(img2)] {
		t.Fatalf("round on the sequencer: %+v; stored %v; want the orphan %s gone, both images kept", res, got, orphan)
	}

	orphan2, err := shared.Put([]byte("nor this"))
	if err != nil {
		t.Fatal(err)
	}
	for len(rounds) > 0 {
		<-rounds
	}
	a.Close()
	jstest.Eventually(t, 20*time.Second, "b sequences", func() error {
		if b.Role() != "sequencer" {
			return fmt.Errorf("b is %q", b.Role())
		}
		return nil
	})
	select {
	case err := <-rounds:
		if err != nil {
			t.Fatalf("the new sequencer's round: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no blob collection round at the promotion")
	}
	got = storedBlobs(t, b)
	if got[orphan2] || !got[gcSHA(img1)] || !got[gcSHA(img2)] {
		t.Fatalf("after the failover: stored %v; want %s gone and both images kept", got, orphan2)
	}
	g := b.Try("GET", "/api/v1/admin/tasks/"+id+"/reference-image", b.AdminToken, nil, nil)
	if g.Status != http.StatusOK || gcSHA(g.Body) != gcSHA(img2) {
		t.Fatalf("the reference image after the collection: %d", g.Status)
	}
}
