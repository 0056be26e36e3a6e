package ledger

import (
	"bytes"
	"crypto/sha256"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// HashSize is the size of an event hash.
const HashSize = sha256.Size

// Actor kinds, as stamped on events.
const (
	ActorOperator = "operator"
	ActorDevice   = "device"
	ActorSystem   = "system"
)

// Actor is who caused an event.
type Actor struct {
	Kind  string `msgpack:"kind" json:"kind"`
	ID    string `msgpack:"id" json:"id"`
	Owner string `msgpack:"owner,omitempty" json:"owner,omitempty"`
}

// Idem is the idempotency record of the request that caused an event:
// its scope (actor and operation), the client's key and the request
// fingerprint.
type Idem struct {
	Scope       string `msgpack:"scope" json:"scope"`
	Key         string `msgpack:"key" json:"key"`
	Fingerprint []byte `msgpack:"fingerprint" json:"fingerprint"`
}

// EventType is the name of an event type as the envelope carries it
// (lowercase and dotted, e.g. "task.claimed"). The names themselves are
// events.Type constants (events.AllEventTypes); the ledger stores any name.
type EventType string

// Event is one entry of the log: an envelope around a typed body.
type Event struct {
	Seq           uint64             `msgpack:"seq"`
	Stream        string             `msgpack:"stream"`
	StreamVersion uint64             `msgpack:"stream_version"`
	Type          EventType          `msgpack:"type"`
	Schema        int                `msgpack:"schema"`
	At            int64              `msgpack:"at"` // server time, Unix milliseconds
	Actor         Actor              `msgpack:"actor"`
	Idem          *Idem              `msgpack:"idem"`
	Body          msgpack.RawMessage `msgpack:"body"`
	PrevHash      []byte             `msgpack:"prev_hash"`
	Hash          []byte             `msgpack:"hash"`
}

// Head is the position of the newest event: its seq, hash and time.
type Head struct {
	Seq  uint64 `msgpack:"seq"`
	Hash []byte `msgpack:"hash"`
	At   int64  `msgpack:"at"`
}

// ZeroHash is the prev_hash of the first event.
var ZeroHash = make([]byte, HashSize)

// GenesisHead is the head of an empty log.
func GenesisHead() Head { return Head{Hash: ZeroHash} }

// Marshal encodes v with the pinned options every stored document uses:
// struct fields in declaration order, compact integers and sorted map keys,
// so the same value always gives the same bytes.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(&buf)
	enc.UseCompactInts(true)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Unmarshal decodes b into v.
func Unmarshal(b []byte, v any) error {
	return msgpack.Unmarshal(b, v)
}

// ComputeHash returns the chain hash of e: SHA-256 over its prev_hash and
// the encoding of e without its own hash.
func ComputeHash(e *Event) ([]byte, error) {
	c := *e
	c.Hash = nil
	b, err := Marshal(&c)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	h.Write(e.PrevHash)
	h.Write(b)
	return h.Sum(nil), nil
}

// StoredHashHolds reports whether raw, the stored bytes of e, hash to
// e.Hash without encoding e again: a stored event ends with its hash as a
// 32-byte binary (Hash is the last field), and the hash was computed over
// the same bytes with that binary replaced by nil (SealEncoded). A start's
// chain check hashes the bytes it read this way; false says only that the
// shortcut does not hold, and ComputeHash decides then.
func StoredHashHolds(raw []byte, e *Event) bool {
	n := len(raw) - 2 - HashSize
	if n < 0 || len(e.Hash) != HashSize || raw[n] != msgpackBin8 || raw[n+1] != HashSize || !bytes.Equal(raw[n+2:], e.Hash) {
		return false
	}
	h := sha256.New()
	h.Write(e.PrevHash)
	h.Write(raw[:n])
	h.Write([]byte{msgpackNil})
	var sum [HashSize]byte
	return bytes.Equal(h.Sum(sum[:0]), e.Hash)
}

// Seal sets e's seq and prev_hash to continue head, computes its hash and
// returns the new head.
func Seal(e *Event, head Head) (Head, error) {
	e.Seq = head.Seq + 1
	e.PrevHash = head.Hash
	h, err := ComputeHash(e)
	if err != nil {
		return head, fmt.Errorf("ledger: seal seq %d: %w", e.Seq, err)
	}
	e.Hash = h
	return Head{Seq: e.Seq, Hash: h, At: e.At}, nil
}

// SealEncoded is Seal that also returns the event's stored encoding
// (Marshal(e) after sealing), so Append need not encode it again. The
// encoding of e without its hash, which the hash is computed over, ends
// with the hash field's nil value (Hash is the last field); the stored
// encoding is the same bytes with that nil replaced by the 32-byte binary.
func SealEncoded(e *Event, head Head) (Head, []byte, error) {
	e.Seq = head.Seq + 1
	e.PrevHash = head.Hash
	c := *e
	c.Hash = nil
	b, err := Marshal(&c)
	if err != nil {
		return head, nil, fmt.Errorf("ledger: seal seq %d: %w", e.Seq, err)
	}
	h := sha256.New()
	h.Write(e.PrevHash)
	h.Write(b)
	e.Hash = h.Sum(nil)
	var enc []byte
	if n := len(b); n > 0 && b[n-1] == msgpackNil {
		enc = append(append(b[:n-1:n-1], msgpackBin8, HashSize), e.Hash...)
	} else if enc, err = Marshal(e); err != nil {
		return head, nil, fmt.Errorf("ledger: seal seq %d: %w", e.Seq, err)
	}
	return Head{Seq: e.Seq, Hash: e.Hash, At: e.At}, enc, nil
}

// msgpack format bytes SealEncoded relies on.
const (
	msgpackNil  = 0xc0
	msgpackBin8 = 0xc4
)

// DecodeEvent decodes a stored envelope (by hand when it has the shape
// Marshal writes: decodefast.go).
func DecodeEvent(b []byte) (Event, error) { return decodeEvent(b, nil) }

func decodeEvent(b []byte, in *interner) (Event, error) {
	var e Event
	if decodeEventFast(b, &e, in) {
		return e, nil
	}
	return decodeEventGeneric(b)
}

// decodeEventGeneric is the generic decoder's reading of b (its own
// variable: the fast path's stays off the heap).
func decodeEventGeneric(b []byte) (Event, error) {
	var e Event
	if err := msgpack.Unmarshal(b, &e); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return e, nil
}
