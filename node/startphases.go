package node

import (
	"time"

	"github.com/rs/zerolog"
)

// StartPhases is how long each step of a node's start-up took, logged once
// the node is open ("node started") and kept on the Node. The damage check
// reads every stored event whatever the snapshot; the other steps read the
// snapshot and the log after it (the whole log on a first start).
type StartPhases struct {
	// Load built the projections: the newest trusted snapshot and the tail
	// after it, or the whole log (with the read model, on a first start).
	Load time.Duration
	// DamageCheck rebuilt the Merkle tree from every stored event (bbolt
	// only), in the background while Load ran; DamageWait is how long the
	// start then waited for it and held it against the newest signed
	// checkpoint.
	DamageCheck, DamageWait time.Duration
	// ChainCheck checked the hash chain from the snapshot (or the
	// checkpoint, when older) to the head.
	ChainCheck time.Duration
	// ReadModel brought the read model of finished tasks to the head
	// (bbolt only; nothing to do when it was current).
	ReadModel time.Duration
	// FilterAhead read the tombstone filter's full segments from the read
	// model (bbolt only), in the background from the start's first read;
	// ReadModel waited for it if it had not ended.
	FilterAhead time.Duration
	// FilterAheadSegments is how many segments it read and the start
	// handed to the projections (none when the read model was rebuilt).
	FilterAheadSegments int
	// Total is the whole of the open, from the first read to serving.
	Total time.Duration
}

// WithoutDamageCheck is the start-up less its wait for the damage check:
// what grows with the live state and the tail, not with the history.
func (p StartPhases) WithoutDamageCheck() time.Duration { return p.Total - p.DamageWait }

func (p StartPhases) log(log zerolog.Logger, l *Loaded) {
	ev := log.Info().Dur("total", p.Total).Dur("load", p.Load).Dur("damage_check", p.DamageCheck).Dur("damage_wait", p.DamageWait).
		Dur("chain_check", p.ChainCheck).Dur("read_model", p.ReadModel).Dur("filter_ahead", p.FilterAhead).Int("filter_ahead_segments", p.FilterAheadSegments).Uint64("replayed", l.Replayed)
	if l.Snapshot != nil {
		ev = ev.Uint64("snapshot_seq", l.Snapshot.Seq)
	}
	ev.Msg("node started")
}
