package commands

import (
	"reflect"
	"testing"

	"taskledger/ledger"
	"taskledger/projections"
)

// TestSoftIdemWritesReplaceTheOlderRecord: a soft record is put under its
// time-ordered key; recording an id again (its older record expired but
// not collected) deletes the older record's key in the same batch, so the
// bucket holds what memory holds.
func TestSoftIdemWritesReplaceTheOlderRecord(t *testing.T) {
	s := projections.New(projections.Config{IdempotencyRetentionMs: 100})
	rec := &projections.IdemRecord{Scope: "device:d:claim-next", Key: "k", Fingerprint: []byte{1}, At: 1000,
		Outcome: projections.OutcomeNoTask, DeviceID: "d"}
	raw, err := projections.EncodeSoftIdem(rec)
	if err != nil {
		t.Fatal(err)
	}
	id := projections.IdemID(rec.Scope, rec.Key)
	first := softIdemWrites(s, rec, raw)
	if want := []ledger.SoftRecord{{Key: projections.SoftIdemKey(id, 1000), Value: raw}}; !reflect.DeepEqual(first, want) {
		t.Fatalf("first record: %q, want %q", first, want)
	}
	s.Idem.PutSoft(rec, raw)
	later := *rec
	later.At = 1200
	raw2, _ := projections.EncodeSoftIdem(&later)
	got := softIdemWrites(s, &later, raw2)
	want := []ledger.SoftRecord{{Key: projections.SoftIdemKey(id, 1000)}, {Key: projections.SoftIdemKey(id, 1200), Value: raw2}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("recorded again: %q, want %q", got, want)
	}
}
