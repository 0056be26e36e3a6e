package ledger

import (
	"crypto/sha256"
	"fmt"
	"hash"
	"sync"

	"taskledger/internal/msgpack/mpwrite"
)

// SealBody is SealEncoded for an event whose body is not encoded yet: it
// stamps seq and prev_hash onto e, writes the envelope with the body that
// appendBody appends (which must be what Marshal(body) gives), hashes it
// and returns the new head and the stored encoding — the same bytes as
// SealEncoded, in one pass and one allocation. e.Body and e.Hash are set
// to slices of those bytes, which must not change.
func SealBody(e *Event, head Head, body any, appendBody func(b []byte, body any) ([]byte, error)) (Head, []byte, error) {
	e.Seq = head.Seq + 1
	e.PrevHash = head.Hash
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	b := appendEnvelopeHead(sc.b[:0], e)
	start := len(b)
	b, err := appendBody(b, body)
	if err != nil {
		return head, nil, fmt.Errorf("ledger: seal seq %d: %w", e.Seq, err)
	}
	end := len(b)
	b = mpwrite.Bin(append(b, keyPrevHash...), e.PrevHash)
	b = mpwrite.Nil(append(b, keyHash...)) // hashed without its hash
	sc.b = b
	sc.h.Reset()
	sc.h.Write(e.PrevHash)
	sc.h.Write(b)
	// Stored: the same bytes with the trailing nil replaced by the hash.
	n := len(b) - 1
	out := make([]byte, n+2+HashSize)
	copy(out, b[:n])
	out[n], out[n+1] = msgpackBin8, HashSize
	sc.h.Sum(out[n+2 : n+2])
	e.Body = out[start:end:end]
	e.Hash = out[n+2:]
	return Head{Seq: e.Seq, Hash: e.Hash, At: e.At}, out, nil
}

type scratch struct {
	b []byte
	h hash.Hash
}

var scratchPool = sync.Pool{New: func() any { return &scratch{b: make([]byte, 0, 1024), h: sha256.New()} }}

// Envelope map keys, as msgpack strings.
var (
	keySeq           = mpwrite.String(nil, "seq")
	keyStream        = mpwrite.String(nil, "stream")
	keyStreamVersion = mpwrite.String(nil, "stream_version")
	keyType          = mpwrite.String(nil, "type")
	keySchema        = mpwrite.String(nil, "schema")
	keyAt            = mpwrite.String(nil, "at")
	keyActor         = mpwrite.String(nil, "actor")
	keyIdem          = mpwrite.String(nil, "idem")
	keyBody          = mpwrite.String(nil, "body")
	keyPrevHash      = mpwrite.String(nil, "prev_hash")
	keyHash          = mpwrite.String(nil, "hash")
	keyKind          = mpwrite.String(nil, "kind")
	keyID            = mpwrite.String(nil, "id")
	keyOwner         = mpwrite.String(nil, "owner")
	keyScope         = mpwrite.String(nil, "scope")
	keyKey           = mpwrite.String(nil, "key")
	keyFingerprint   = mpwrite.String(nil, "fingerprint")
)

// appendEnvelopeHead appends Marshal(e)'s bytes up to the body's value:
// the map header and the fields before it, and the body's key.
func appendEnvelopeHead(b []byte, e *Event) []byte {
	b = mpwrite.MapLen(b, 11)
	b = mpwrite.Uint(append(b, keySeq...), e.Seq)
	b = mpwrite.String(append(b, keyStream...), e.Stream)
	b = mpwrite.Uint(append(b, keyStreamVersion...), e.StreamVersion)
	b = mpwrite.String(append(b, keyType...), string(e.Type))
	b = mpwrite.Int(append(b, keySchema...), int64(e.Schema))
	b = mpwrite.Int(append(b, keyAt...), e.At)
	b = append(b, keyActor...)
	if e.Actor.Owner == "" { // omitempty
		b = mpwrite.MapLen(b, 2)
	} else {
		b = mpwrite.MapLen(b, 3)
	}
	b = mpwrite.String(append(b, keyKind...), e.Actor.Kind)
	b = mpwrite.String(append(b, keyID...), e.Actor.ID)
	if e.Actor.Owner != "" {
		b = mpwrite.String(append(b, keyOwner...), e.Actor.Owner)
	}
	b = append(b, keyIdem...)
	if e.Idem == nil {
		b = mpwrite.Nil(b)
	} else {
		b = mpwrite.MapLen(b, 3)
		b = mpwrite.String(append(b, keyScope...), e.Idem.Scope)
		b = mpwrite.String(append(b, keyKey...), e.Idem.Key)
		b = mpwrite.Bin(append(b, keyFingerprint...), e.Idem.Fingerprint)
	}
	return append(b, keyBody...)
}
