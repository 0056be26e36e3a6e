package node

import (
	"bytes"
	"errors"
	"fmt"

	"taskledger/ledger"
	"taskledger/projections"
)

// ErrNotEmpty is a migration target that already holds events.
var ErrNotEmpty = errors.New("the target ledger is not empty")

// Migration batch bounds: a message of the JetStream backend is one batch,
// and the server's default max_payload is 1 MiB.
const (
	migrateBatchEvents = 1024
	migrateBatchBytes  = 512 << 10
)

// Migrate copies a ledger into an empty backend: every event with its
// stored bytes (so the same seqs and hashes), the soft records, the manual
// clock, the secret key-check value and the admin tokens; then it verifies
// the copy (VerifyBackend) and checks that its head is the source's.
func Migrate(src ledger.Backend, dst ledger.Backend, cfg projections.Config) (*VerifyReport, error) {
	head, err := dst.Head()
	if err != nil {
		return nil, err
	}
	if head.Seq != 0 {
		return nil, fmt.Errorf("%w: it holds %d events", ErrNotEmpty, head.Seq)
	}
	at := ledger.GenesisHead()
	var batch ledger.Batch
	size := 0
	flush := func() error {
		if len(batch.Events) == 0 {
			return nil
		}
		batch.Expected = at
		if err := dst.Append(&batch); err != nil {
			return fmt.Errorf("append seqs %d-%d: %w", at.Seq+1, batch.Events[len(batch.Events)-1].Seq, err)
		}
		last := batch.Events[len(batch.Events)-1]
		at = ledger.Head{Seq: last.Seq, Hash: last.Hash, At: last.At}
		batch, size = ledger.Batch{}, 0
		return nil
	}
	err = src.RangeRaw(0, func(seq uint64, raw []byte) error {
		e, err := ledger.DecodeEvent(raw)
		if err != nil {
			return fmt.Errorf("seq %d: %w", seq, err)
		}
		if len(batch.Events) == migrateBatchEvents || (size+len(raw) > migrateBatchBytes && len(batch.Events) > 0) {
			if err := flush(); err != nil {
				return err
			}
		}
		batch.Events = append(batch.Events, &e)
		batch.Encoded = append(batch.Encoded, bytes.Clone(raw))
		size += len(raw)
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	meta := ledger.Batch{Expected: at}
	if err := src.SoftRecords("", func(k string, v []byte) error {
		meta.Soft = append(meta.Soft, ledger.SoftRecord{Key: k, Value: v})
		return nil
	}); err != nil {
		return nil, fmt.Errorf("migrate: soft records: %w", err)
	}
	mc, err := src.ManualClock()
	if err != nil {
		return nil, fmt.Errorf("migrate: manual clock: %w", err)
	}
	if mc != (ledger.ManualClock{}) {
		meta.ManualClock = &mc
	}
	if meta.SecretCheck, err = src.SecretCheck(); err != nil {
		return nil, fmt.Errorf("migrate: secret check: %w", err)
	}
	if err := dst.Append(&meta); err != nil {
		return nil, fmt.Errorf("migrate: records: %w", err)
	}
	admins, err := src.AdminTokens()
	if err != nil {
		return nil, fmt.Errorf("migrate: admin tokens: %w", err)
	}
	for name, hash := range admins {
		if err := dst.PutAdminToken(name, hash); err != nil {
			return nil, fmt.Errorf("migrate: admin token %s: %w", name, err)
		}
	}
	rep, err := VerifyBackend(dst, cfg)
	if err != nil {
		return nil, fmt.Errorf("migrate: the copy does not verify: %w", err)
	}
	srcHead, err := src.Head()
	if err != nil {
		return nil, err
	}
	if rep.Head.Seq != srcHead.Seq || !bytes.Equal(rep.Head.Hash, srcHead.Hash) {
		return nil, fmt.Errorf("migrate: the copy ends at seq %d, the source at %d", rep.Head.Seq, srcHead.Seq)
	}
	return rep, nil
}
