package projections

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestCapturedRecordsAreTheLiveOnes: whatever mix of recordings, records
// of an id recorded again, and expiries the view went through, the
// records and the order a capture encodes (read back by a restore) are
// those the view holds at that moment, and later changes leave an
// earlier capture as it was.
func TestCapturedRecordsAreTheLiveOnes(t *testing.T) {
	const retention = 50
	rng := rand.New(rand.NewPCG(1, 2))
	s := New(Config{IdempotencyRetentionMs: retention})
	type taken struct {
		c       *Capture
		records map[string]*IdemRecord
		order   []string
	}
	var earlier []taken
	at := int64(0)
	for step := range 600 {
		at += rng.Int64N(3)
		k := fmt.Sprint("k", rng.IntN(40)) // ids come back: recorded again while alive, or after they left
		s.Idem.put(&IdemRecord{Scope: "device:d:op", Key: k, At: at, Seq: uint64(step + 1), Outcome: OutcomeAccepted})
		s.Head.At = at
		s.Idem.expire(at, retention)
		if step%7 == 0 {
			earlier = append(earlier, taken{s.Capture(), must(s.Idem.allRecords()), s.Idem.fullOrder()})
		}
	}
	if len(s.Idem.tombs) == 0 || len(s.Idem.Tombstones) != len(s.Idem.tombs) {
		t.Fatalf("%d tombstones listed for %d in the map", len(s.Idem.tombs), len(s.Idem.Tombstones))
	}
	for i, e := range earlier {
		b, err := e.c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		r, err := Restore(b, s.Config())
		if err != nil {
			t.Fatal(err)
		}
		if got := must(r.Idem.allRecords()); !reflect.DeepEqual(got, e.records) {
			t.Fatalf("capture %d: %d records restored, %d held when captured", i, len(got), len(e.records))
		}
		if got := r.Idem.fullOrder(); !reflect.DeepEqual(got, e.order) {
			t.Fatalf("capture %d: order %v restored, %v held when captured", i, got, e.order)
		}
	}
}
