package node

import (
	"errors"

	"taskledger/audit/checkpoint"
	"taskledger/audit/transparency"
)

// openTransparency is a cluster node's transparency log: the Merkle tree
// over the stream (rebuilt here, then extended by every commit and every
// followed batch), checkpoints in the stream's META bucket, signed by the
// sequencer only, with the cluster's checkpoint key. Every node is given
// the same key as DATA/checkpoint-key (mode 0600); a cluster node never
// creates one, since a key per node would sign checkpoints no auditor can
// hold against each other across a failover (D380). Without the key the
// node serves no transparency log (its routes 404) and says so.
func (c *clusterLink) openTransparency(cfg Config, clock transparency.Clock) (*transparency.Log, error) {
	key, err := checkpoint.LoadKey(cfg.DataDir)
	if errors.Is(err, checkpoint.ErrNoKey) {
		c.logger.Warn().Str("file", checkpoint.KeyFile).
			Msg("no checkpoint key in the data directory: this node serves no checkpoints or proofs; " +
				"give every node the same key file (docs/operations.md)")
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	tree, err := transparency.BuildFull(c.log) // every node kept: the stream is not read back by seq (D441)
	if err != nil {
		return nil, err
	}
	return transparency.OpenShared(c.log, tree, key, clock, cfg.Logger, c.sequencing)
}
