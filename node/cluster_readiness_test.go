package node_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"taskledger/api"
	"taskledger/ledger/jetstream/jstest"
	"taskledger/node/nodetest"
)

// readyzReason is /readyz's answer on n: "" for 200 ready, else the reason
// of a 503 not_ready.
func readyzReason(n *nodetest.Node) (string, error) {
	r := n.Try("GET", "/readyz", "", nil, nil)
	if r.Err != nil {
		return "", r.Err
	}
	if r.Status == http.StatusOK {
		return "", nil
	}
	var body map[string]string
	if r.Status != http.StatusServiceUnavailable || json.Unmarshal(r.Body, &body) != nil || body["status"] != "not_ready" {
		return "", fmt.Errorf("readyz: %d %s", r.Status, r.Body)
	}
	return body["reason"], nil
}

// TestClusterReadyzFollowsQuorum: the sequencer and a follower of a
// healthy cluster are ready; once two of the three NATS servers are gone
// (no quorum, commands answered 503) neither is: /readyz names no_quorum
// or no_sequencer, while /healthz stays 200.
func TestClusterReadyzFollowsQuorum(t *testing.T) {
	servers := jstest.Cluster(t)
	nodes := startNodes(t, jstest.URLs(servers), 2)
	for i, n := range nodes {
		jstest.Eventually(t, 10*time.Second, fmt.Sprintf("node %d ready", i), func() error {
			if reason, err := readyzReason(n); err != nil || reason != "" {
				return fmt.Errorf("not ready: %q %v", reason, err)
			}
			return nil
		})
	}
	for _, s := range servers[1:] {
		s.Shutdown()
		s.WaitForShutdown()
	}
	for i, n := range nodes {
		jstest.Eventually(t, 20*time.Second, fmt.Sprintf("node %d not ready without quorum", i), func() error {
			reason, err := readyzReason(n)
			if err != nil {
				return err
			}
			if reason != api.NotReadyNoQuorum && reason != api.NotReadyNoSequencer {
				return fmt.Errorf("readyz reason %q, want no_quorum or no_sequencer", reason)
			}
			return nil
		})
		nodetest.Must(t, n.Do("GET", "/healthz", "", nil, nil), http.StatusOK)
	}
}
