package commands

import (
	"taskledger/ledger"
	"taskledger/projections"
)

// CollectSoft forgets the soft idempotency records ("no task" claim-next
// outcomes, quiet heartbeats) that expired at the command's time, at most
// Limit of them, oldest first: dropped from the projections and deleted
// from the soft bucket in the same batch, so memory and disk always hold
// the same records. It appends no event; with nothing expired it writes
// nothing. Its answer's Value is the number collected (an int).
type CollectSoft struct {
	Limit int
}

// DefaultCollectLimit bounds the deletes one CollectSoft adds to a batch.
const DefaultCollectLimit = 1024

// Decide lists the expired records and deletes them.
func (c *CollectSoft) Decide(x *Ctx) (*Decision, error) {
	limit := c.Limit
	if limit <= 0 {
		limit = DefaultCollectLimit
	}
	now, retention := x.Now, x.Cfg.IdempotencyRetention.Milliseconds()
	ids := x.State.Idem.ExpiredSoft(now, retention, limit)
	// Fingerprints of collected "no task" keys are kept one more retention
	// (D325).
	goneKeys := x.State.Idem.ExpiredGone(now, retention)
	if len(ids) == 0 && len(goneKeys) == 0 {
		return &Decision{Answer: func(*projections.State) Result { return Result{Value: 0} }}, nil
	}
	del := make([]ledger.SoftRecord, len(ids), len(ids)+len(goneKeys)+1)
	var gone []uint64
	for i, id := range ids {
		key, _ := x.State.Idem.SoftKey(id) // ExpiredSoft lists held records only
		del[i] = ledger.SoftRecord{Key: key}
		if projections.IsClaimNextID(id) {
			gone = append(gone, projections.GoneFingerprint(id))
		}
	}
	for _, k := range goneKeys {
		del = append(del, ledger.SoftRecord{Key: k})
	}
	goneKey := x.State.Idem.NextGoneKey(now)
	if len(gone) > 0 {
		// the collected "no task" keys stay expired (D322)
		del = append(del, ledger.SoftRecord{Key: goneKey, Value: projections.EncodeGone(gone)})
	}
	return &Decision{
		Soft: del,
		Effect: func(s *projections.State) {
			s.Idem.DropExpiredSoft(now, retention, limit)
			s.Idem.DropExpiredGone(now, retention)
			if len(gone) > 0 {
				s.Idem.AddGone(goneKey, now, gone)
			}
		},
		Answer: func(*projections.State) Result { return Result{Value: len(ids)} },
	}, nil
}
