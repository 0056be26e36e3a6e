package ledger

import (
	"encoding/binary"
	"fmt"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// leafFill is how full the leaf pages of a read-model bucket are.
func leafFill(t *testing.T, s *Store, bucket string) float64 {
	t.Helper()
	var st bolt.BucketStats
	if err := s.db.View(func(tx *bolt.Tx) error {
		st = tx.Bucket([]byte(bucket)).Stats()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return float64(st.LeafInuse) / float64(st.LeafAlloc)
}

func seqRows(bucket string, from, n int) []ReadModelWrite {
	ws := make([]ReadModelWrite, n)
	for i := range ws {
		ws[i] = ReadModelWrite{Bucket: bucket, Key: binary.BigEndian.AppendUint64(nil, uint64(from+i)), Value: make([]byte, 120)}
	}
	return ws
}

// TestAppendedRowsFillWholePages: rows whose keys only grow (the records'
// seqs) fill their pages, batch after batch, deletes at the front
// besides; rows put between existing keys keep bbolt's half-full split.
func TestAppendedRowsFillWholePages(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	grow, mixed := ReadModelPrefix+"grow", ReadModelPrefix+"mixed"
	for batch := range 20 {
		ws := seqRows(grow, batch*500, 500)
		if batch > 0 {
			ws = append(seqRows(grow, (batch-1)*500, 10), ws...)
			for i := range 10 {
				ws[i].Value = nil // the oldest go
			}
		}
		if err := s.WriteReadModel(ws); err != nil {
			t.Fatal(err)
		}
	}
	if f := leafFill(t, s, grow); f < 0.9 {
		t.Errorf("appended rows fill %.2f of their pages, want ≥ 0.9", f)
	}
	// Even keys first, then the odd ones between them: not appends.
	for _, odd := range []int{0, 1} {
		var ws []ReadModelWrite
		for i := range 5000 {
			ws = append(ws, ReadModelWrite{Bucket: mixed, Key: fmt.Appendf(nil, "%08d", 2*i+odd), Value: make([]byte, 120)})
		}
		if err := s.WriteReadModel(ws); err != nil {
			t.Fatal(err)
		}
	}
	if f := leafFill(t, s, mixed); f > 0.85 {
		t.Errorf("rows put between others fill %.2f of their pages: the whole-page fill was used where keys do not grow", f)
	}
}
