package ledger

import (
	"bytes"
	"strings"
	"testing"
)

// TestSealEncodedMatchesMarshal: the stored bytes SealEncoded derives from
// the hash-less encoding are exactly Marshal of the sealed event, and the
// seal (seq, prev_hash, hash, head) is Seal's.
func TestSealEncodedMatchesMarshal(t *testing.T) {
	bodies := [][]byte{{0xc0}, {0x80}, append([]byte{0xdc, 0x01, 0x90}, bytes.Repeat([]byte{0xa1, 'x'}, 400)...)}
	idems := []*Idem{nil, {Scope: "device:d:heartbeat", Key: "k", Fingerprint: bytes.Repeat([]byte{7}, 32)}}
	head := Head{Seq: 41, Hash: bytes.Repeat([]byte{3}, HashSize), At: 1767323050000}
	for _, body := range bodies {
		for _, id := range idems {
			for _, stream := range []string{"", "task/0b6f1c1e-8f7a-4d7e-9a55-1c2d3e4f5a6b", strings.Repeat("s", 300)} {
				mk := func() *Event {
					return &Event{Stream: stream, StreamVersion: 1 << 40, Type: "task.heartbeat", Schema: 2, At: head.At,
						Actor: Actor{Kind: ActorDevice, ID: "d", Owner: "o"}, Idem: id, Body: body}
				}
				a, b := mk(), mk()
				ha, err := Seal(a, head)
				if err != nil {
					t.Fatal(err)
				}
				hb, enc, err := SealEncoded(b, head)
				if err != nil {
					t.Fatal(err)
				}
				want, _ := Marshal(a)
				if !bytes.Equal(enc, want) || !bytes.Equal(ha.Hash, hb.Hash) || ha.Seq != hb.Seq || !bytes.Equal(a.Hash, b.Hash) {
					t.Fatalf("stream %q idem %v body %d bytes: SealEncoded differs from Seal + Marshal", stream, id != nil, len(body))
				}
				got, err := DecodeEvent(enc)
				if err != nil || !bytes.Equal(got.Hash, a.Hash) {
					t.Fatalf("encoding does not decode to the sealed event: %v", err)
				}
			}
		}
	}
}

// TestAppendEncodedStoresSameBytes: a batch carrying its encodings stores
// what a batch without them stores.
func TestAppendEncodedStoresSameBytes(t *testing.T) {
	plain, withEnc := mustOpen(t, t.TempDir()), mustOpen(t, t.TempDir())
	evs, _ := sealed(t, GenesisHead(), 3, "a", 1)
	var enc [][]byte
	for _, e := range evs {
		c := *e
		_, raw, err := SealEncoded(&c, Head{Seq: e.Seq - 1, Hash: e.PrevHash, At: e.At})
		if err != nil {
			t.Fatal(err)
		}
		enc = append(enc, raw)
	}
	if err := plain.Append(&Batch{Expected: GenesisHead(), Events: evs}); err != nil {
		t.Fatal(err)
	}
	if err := withEnc.Append(&Batch{Expected: GenesisHead(), Events: evs, Encoded: enc}); err != nil {
		t.Fatal(err)
	}
	var a, b [][]byte
	_ = plain.RangeRaw(0, func(_ uint64, raw []byte) error { a = append(a, append([]byte(nil), raw...)); return nil })
	_ = withEnc.RangeRaw(0, func(_ uint64, raw []byte) error { b = append(b, append([]byte(nil), raw...)); return nil })
	if len(a) != 3 || len(b) != 3 {
		t.Fatalf("stored %d and %d events", len(a), len(b))
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Fatalf("seq %d: stored bytes differ", i+1)
		}
	}
}

// TestStoredHashHoldsOnlyForTheSealedBytes: the hash of a sealed event's
// stored bytes holds without encoding it again, and a changed byte of
// its content, its prev_hash or its hash makes it fail.
func TestStoredHashHoldsOnlyForTheSealedBytes(t *testing.T) {
	head := Head{Seq: 6, Hash: bytes.Repeat([]byte{5}, HashSize), At: 1767323050000}
	e := &Event{Stream: "task/t", StreamVersion: 3, Type: "task.started", Schema: 1, At: head.At,
		Actor: Actor{Kind: ActorDevice, ID: "d"}, Body: []byte{0x81, 0xa1, 'a', 0x01}}
	_, raw, err := SealEncoded(e, head)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeEvent(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !StoredHashHolds(raw, &got) {
		t.Fatal("the stored bytes of a sealed event do not hash to its hash")
	}
	for i := range raw {
		edited := bytes.Clone(raw)
		edited[i] ^= 0x01
		d, err := DecodeEvent(edited)
		if err != nil {
			continue
		}
		if StoredHashHolds(edited, &d) {
			t.Fatalf("byte %d of %d changed: the hash still holds", i, len(raw))
		}
	}
	other := got
	other.PrevHash = bytes.Repeat([]byte{6}, HashSize)
	if StoredHashHolds(raw, &other) {
		t.Fatal("another prev_hash: the hash still holds")
	}
	if StoredHashHolds(raw[:len(raw)-1], &got) || StoredHashHolds(nil, &got) {
		t.Fatal("cut bytes: the hash still holds")
	}
}
