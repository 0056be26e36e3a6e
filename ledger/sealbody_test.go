package ledger

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// boundaryLens are string and binary lengths where msgpack changes header.
var boundaryLens = []int{0, 1, 31, 32, 255, 256, 65535, 65536}

// boundaryInts are integers where msgpack changes representation.
var boundaryInts = []int64{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64,
	-1, -32, -33, -128, -129, -32768, -32769, math.MinInt32, math.MinInt32 - 1, math.MinInt64}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

func randString(r *rand.Rand) string {
	return strings.Repeat("é", pick(r, boundaryLens)/2) + strings.Repeat("x", r.IntN(2))
}

// TestSealBodyMatchesSealEncoded: SealBody writes exactly the bytes
// SealEncoded (Marshal) writes, for envelopes around every header size of
// every field, and stamps the same seq, prev_hash, body and hash.
func TestSealBodyMatchesSealEncoded(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	appendRaw := func(b []byte, body any) ([]byte, error) { return append(b, body.([]byte)...), nil }
	for i := range 300 {
		var id *Idem
		if r.IntN(3) > 0 {
			id = &Idem{Scope: randString(r), Key: randString(r)}
			switch r.IntN(3) {
			case 0:
				id.Fingerprint = bytes.Repeat([]byte{7}, pick(r, boundaryLens))
			case 1:
				id.Fingerprint = []byte{}
			}
		}
		owner := ""
		if r.IntN(2) == 0 {
			owner = randString(r)
		}
		body, _ := Marshal(map[string]any{"s": randString(r), "n": pick(r, boundaryInts)})
		head := Head{Seq: uint64(pick(r, boundaryInts[:11])), Hash: bytes.Repeat([]byte{byte(i)}, HashSize), At: pick(r, boundaryInts)}
		if i%7 == 0 {
			head = GenesisHead()
		}
		mk := func() *Event {
			return &Event{Stream: randString(r), StreamVersion: uint64(pick(r, boundaryInts)), Type: EventType(randString(r)),
				Schema: int(pick(r, boundaryInts)), At: pick(r, boundaryInts), Actor: Actor{Kind: randString(r), ID: randString(r), Owner: owner},
				Idem: id}
		}
		a := mk()
		b := *a
		a.Body = body
		ha, want, err := SealEncoded(a, head)
		if err != nil {
			t.Fatal(err)
		}
		hb, got, err := SealBody(&b, head, []byte(body), appendRaw)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("case %d: SealBody wrote\n%x\nSealEncoded wrote\n%x", i, got, want)
		}
		if ha.Seq != hb.Seq || !bytes.Equal(ha.Hash, hb.Hash) || ha.At != hb.At || b.Seq != a.Seq ||
			!bytes.Equal(b.PrevHash, a.PrevHash) || !bytes.Equal(b.Hash, a.Hash) || !bytes.Equal(b.Body, a.Body) {
			t.Fatalf("case %d: SealBody stamped another seal or body", i)
		}
	}
}
