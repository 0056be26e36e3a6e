package projections

import (
	"fmt"
	"testing"
)

// TestIdempotencyLookupsBuildNoIDOnTheHeap: the sequencer looks a key up
// several times a command (its record, its tombstone, its soft record,
// whether it was collected); none of those lookups builds the key's id on
// the heap, whether the key is held, expired or new.
func TestIdempotencyLookupsBuildNoIDOnTheHeap(t *testing.T) {
	smallTombSegments(t, 64, 256)
	live := liveWithFilterRows(t, 2000, memReadModel{})
	v := live.Idem
	// Ids as long as a device's: a device id and a key of 36 characters.
	const scope = "device:0b5e3a6c-9d3f-4f5e-8a7b-2c1d0e9f8a7b:start"
	const key = "5f2b8c1e-3d4a-4b6c-9e8f-7a6b5c4d3e2f"
	held := &IdemRecord{Scope: scope, Key: key, At: 10, Outcome: OutcomeAccepted, Seq: 1}
	v.put(held)
	soft := softRec(key, 10)
	put(t, v, soft)
	v.tombstone(IdemID(scope, key+"-expired")) // held in memory until the next hand-off
	if _, expired := v.Lookup(scope, key+"-expired", 0, 50); !expired {
		t.Fatal("an expired key is not expired")
	}
	fresh := ""
	for i := range 100 { // a fresh key the filter rules out (no read of the index)
		k := fmt.Sprintf("%s-%d", key, i)
		if !v.filter.mayHave(TombstoneID(IdemID(scope, k))) {
			fresh = k
			break
		}
	}
	if fresh == "" {
		t.Fatal("the filter rules out none of 100 fresh keys")
	}
	for name, lookup := range map[string]func(){
		"a held record":           func() { v.Lookup(scope, key, 20, 1000) },
		"a held record by Record": func() { v.Record(scope, key) },
		"a tombstone":             func() { v.Lookup(scope, key+"-expired", 0, 50) },
		"a fresh key":             func() { v.Lookup(scope, fresh, 0, 50) },
		"no soft record":          func() { v.SoftLookup(soft.Scope, fresh, 20, 1000) },
		"a soft record's expiry":  func() { v.SoftExpired(soft.Scope, key, 20, 1000) },
		"a collected key":         func() { v.Gone(soft.Scope, fresh) },
	} {
		if n := testing.AllocsPerRun(50, lookup); n != 0 {
			t.Errorf("looking up %s: %.0f allocations, want none", name, n)
		}
	}
	if r, _ := v.Lookup(scope, key, 20, 1000); r != held || v.Record(scope, key) != held {
		t.Fatal("the held record is not found")
	}
}
