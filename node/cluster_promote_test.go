package node_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"taskledger/ledger/jetstream"
	"taskledger/ledger/jetstream/jstest"
	"taskledger/node"
	"taskledger/node/nodetest"
)

// TestSlowPromotionKeepsTheLease: a node whose promotion takes several
// lease TTLs (a long catch-up, soft records loaded under load) renews the
// lease it took while it promotes, so no other node takes it meanwhile;
// it ends sequencing with a live lease, and commands commit through every
// node. Without the renewals the lease expires during the promotion, the
// third node takes it, and the slow node sequences at a lost revision
// until its next renewal steps it down.
func TestSlowPromotionKeepsTheLease(t *testing.T) {
	servers := jstest.Cluster(t)
	url := jstest.URLs(servers)
	nodes := startNodes(t, url, 3)
	nodetest.Must(t, createVia(nodes[0], nodetest.NewKey()), http.StatusCreated)

	var mu sync.Mutex
	var promoted []string // the advertised URL of every promotion since the hook, in order
	restore := node.SetPromoteHook(func(advertised string) {
		mu.Lock()
		promoted = append(promoted, advertised)
		first := len(promoted) == 1
		mu.Unlock()
		if first {
			time.Sleep(3 * testLeaseTTL) // the slow promotion itself, not a wait for anything
		}
	})
	defer restore()
	nodes[0].Close() // releases the lease: one of the others takes it

	byURL := map[string]*nodetest.Node{nodes[1].URL: nodes[1], nodes[2].URL: nodes[2]}
	var first string
	jstest.Eventually(t, 20*time.Second, "a node promotes", func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(promoted) == 0 {
			return fmt.Errorf("no promotion yet")
		}
		first = promoted[0]
		return nil
	})
	slow, other := byURL[first], nodes[1]
	if slow == nil {
		t.Fatalf("the promotion was of %q, not of a node of this cluster", first)
	}
	if other == slow {
		other = nodes[2]
	}
	// The lease must not change hands: a promotion of another node, or the
	// other node seen promoting or sequencing, fails at once.
	keptTheLease := func() {
		mu.Lock()
		seen := slices.Clone(promoted)
		mu.Unlock()
		if r := other.Role(); len(seen) != 1 || r != "follower" {
			t.Fatalf("while %s promoted slowly: promotions %v, the other node %q: the lease changed hands",
				slow.URL, seen, r)
		}
	}
	jstest.Eventually(t, 30*time.Second, "the slow node sequences and is ready", func() error {
		keptTheLease()
		if r := slow.Role(); r != "sequencer" {
			return fmt.Errorf("the slow node is %q", r)
		}
		if r := slow.Try("GET", "/readyz", "", nil, nil); r.Status != http.StatusOK {
			return fmt.Errorf("the slow node's /readyz answered %d %s", r.Status, r.Body)
		}
		return nil
	})
	if holder := leaseHolder(t, url); holder != slow.URL {
		t.Fatalf("the lease is held by %q, want the slow node %s", holder, slow.URL)
	}

	jstest.Eventually(t, 10*time.Second, "the other node follows the slow one", func() error {
		if s := other.Sequencer(); s != slow.URL {
			return fmt.Errorf("the other node knows %q", s)
		}
		return nil
	})
	nodetest.Must(t, createVia(slow, nodetest.NewKey()), http.StatusCreated)
	nodetest.Must(t, createVia(other, nodetest.NewKey()), http.StatusCreated) // forwarded to the slow node
	if r := slow.Role(); r != "sequencer" {
		t.Fatalf("after the commands the slow node is %q", r)
	}
	keptTheLease()
}

// leaseHolder reads the cluster's sequencer lease on a connection of its
// own and returns the advertised URL it names.
func leaseHolder(t *testing.T, natsURL string) string {
	t.Helper()
	log, err := jetstream.Open(jetstream.Config{URL: natsURL, Name: mustName(t), Replicas: 3, Timeout: 5 * time.Second,
		StartTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	lease, err := log.Lease(testLeaseTTL)
	if err != nil {
		t.Fatal(err)
	}
	raw, _, err := lease.Current()
	if err != nil {
		t.Fatalf("read the lease: %v", err)
	}
	var v struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("the lease holds %q: %v", raw, err)
	}
	return v.URL
}
