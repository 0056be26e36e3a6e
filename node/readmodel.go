package node

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"taskledger/ledger"
	"taskledger/projections"
)

// syncReadModel makes the on-disk read model of finished tasks the one of
// the loaded projections: kept when it was written with this build's
// layout, schema and retention up to the log's head (every commit writes
// it with its events), rebuilt from the projections in one transaction
// otherwise (a file written before it existed, a schema change, another
// retention). The settled tasks are then marked as written.
func syncReadModel(store *ledger.Store, st *projections.State, log zerolog.Logger) error {
	head, err := store.ReadModelGet(projections.RMMeta, projections.RMHeadKey())
	if err != nil {
		return err
	}
	version, err := store.ReadModelGet(projections.RMMeta, projections.RMVersionKey())
	if err != nil {
		return err
	}
	if !st.ReadModelCurrent(head, version) {
		ws, err := st.ReadModelWrites()
		if err != nil {
			return err
		}
		if err := store.ResetReadModel(ws); err != nil {
			return fmt.Errorf("rebuild the read model: %w", err)
		}
		log.Info().Uint64("head", st.Head.Seq).Int("writes", len(ws)).Msg("read model of finished tasks rebuilt from the projections")
	}
	st.SettleLoaded()
	return nil
}

// CompareReadModel compares the read model on disk with the one the
// projections st (a full replay at the same head) give: every bucket, key
// and value. It names the first difference.
func CompareReadModel(store *ledger.Store, st *projections.State) error {
	want, err := st.ReadModelWrites()
	if err != nil {
		return err
	}
	type kv struct{ bucket, key, value string }
	wantKV := make([]kv, 0, len(want))
	for _, w := range want {
		wantKV = append(wantKV, kv{w.Bucket, string(w.Key), string(w.Value)})
	}
	cmpKV := func(a, b kv) int {
		if c := strings.Compare(a.bucket, b.bucket); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	}
	slices.SortFunc(wantKV, cmpKV)
	var got []kv
	if err := store.ReadModelBuckets(func(bucket string, k, v []byte) error {
		got = append(got, kv{bucket, string(k), string(v)})
		return nil
	}); err != nil {
		return err
	}
	slices.SortFunc(got, cmpKV)
	for i := 0; i < max(len(got), len(wantKV)); i++ {
		switch {
		case i >= len(got):
			return fmt.Errorf("read model: %s %x is missing on disk", wantKV[i].bucket, wantKV[i].key)
		case i >= len(wantKV):
			return fmt.Errorf("read model: %s %x is on disk, not in a replay", got[i].bucket, got[i].key)
		case cmpKV(got[i], wantKV[i]) != 0:
			if cmpKV(got[i], wantKV[i]) < 0 {
				return fmt.Errorf("read model: %s %x is on disk, not in a replay", got[i].bucket, got[i].key)
			}
			return fmt.Errorf("read model: %s %x is missing on disk", wantKV[i].bucket, wantKV[i].key)
		case !bytes.Equal([]byte(got[i].value), []byte(wantKV[i].value)):
			return fmt.Errorf("read model: %s %x differs from a replay", got[i].bucket, got[i].key)
		}
	}
	return nil
}

// verifyReadModel compares the read model on disk with the replay st when
// it is this build's at the log's head, and reports whether it did.
func verifyReadModel(store *ledger.Store, st *projections.State) (bool, error) {
	head, err := store.ReadModelGet(projections.RMMeta, projections.RMHeadKey())
	if err != nil {
		return false, err
	}
	version, err := store.ReadModelGet(projections.RMMeta, projections.RMVersionKey())
	if err != nil {
		return false, err
	}
	if !st.ReadModelCurrent(head, version) {
		return false, nil
	}
	return true, CompareReadModel(store, st)
}
