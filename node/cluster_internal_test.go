package node

import (
	"errors"
	"testing"

	"github.com/rs/zerolog"

	"taskledger/projections"
)

// TestClusterReloadWaitsOutAnOutage: the cluster's reload tries again
// until the stream can be read, and gives up only when the node closes.
func TestClusterReloadWaitsOutAnOutage(t *testing.T) {
	c := &clusterLink{logger: zerolog.Nop(), stop: make(chan struct{})}
	calls := 0
	load := c.retrying(func() (*projections.State, error) {
		calls++
		if calls < 3 {
			return nil, errors.New("stream info: context deadline exceeded")
		}
		return projections.New(projections.Config{}), nil
	})
	if s, err := load(); err != nil || s == nil || calls != 3 {
		t.Fatalf("reload: %v after %d calls", err, calls)
	}
	close(c.stop)
	down := c.retrying(func() (*projections.State, error) { return nil, errors.New("down") })
	if _, err := down(); err == nil {
		t.Fatal("a reload on a closed node returned no error")
	}
}
