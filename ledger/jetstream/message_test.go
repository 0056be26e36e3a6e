package jetstream

import (
	"bytes"
	"testing"

	"taskledger/ledger"
)

// FuzzBatchMessage feeds arbitrary bodies to the batch message decoder:
// it never panics, and a body it accepts re-encodes to the same bytes.
func FuzzBatchMessage(f *testing.F) {
	e := &ledger.Event{Stream: "task/a", StreamVersion: 1, Type: "t", Schema: 1, At: 1, Body: []byte{0x80}}
	if _, err := ledger.Seal(e, ledger.GenesisHead()); err != nil {
		f.Fatal(err)
	}
	good, err := encodeBatch(&ledger.Batch{Events: []*ledger.Event{e, e}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte{messageFormat})
	f.Add([]byte{messageFormat, 0xff, 0xff})
	f.Add([]byte{2, 1, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		var raws [][]byte
		if err := eachEnvelope(body, func(raw []byte) error { raws = append(raws, raw); return nil }); err != nil {
			return
		}
		evs := make([]*ledger.Event, len(raws))
		for i := range evs {
			evs[i] = &ledger.Event{}
		}
		again, err := encodeBatch(&ledger.Batch{Events: evs, Encoded: raws})
		if err != nil {
			t.Fatal(err)
		}
		// Varint lengths have one shortest form; a longer one is accepted
		// but re-encodes shorter, so compare the envelopes, not the bytes.
		var back [][]byte
		if err := eachEnvelope(again, func(raw []byte) error { back = append(back, raw); return nil }); err != nil {
			t.Fatalf("re-encoded body does not decode: %v", err)
		}
		if len(back) != len(raws) {
			t.Fatalf("%d envelopes, re-encoded %d", len(raws), len(back))
		}
		for i := range raws {
			if !bytes.Equal(back[i], raws[i]) {
				t.Fatalf("envelope %d changed", i)
			}
		}
	})
}
