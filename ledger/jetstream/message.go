package jetstream

import (
	"encoding/binary"
	"fmt"

	"taskledger/ledger"
)

// A batch message's body: the format byte, then each event's stored
// envelope (the bytes bbolt would store under its seq) prefixed by its
// length as an unsigned varint.
const messageFormat = 1

func encodeBatch(b *ledger.Batch) ([]byte, error) {
	enc := b.Encoded
	if len(enc) != len(b.Events) {
		enc = make([][]byte, len(b.Events))
		for i, e := range b.Events {
			v, err := ledger.Marshal(e)
			if err != nil {
				return nil, fmt.Errorf("jetstream: encode seq %d: %w", e.Seq, err)
			}
			enc[i] = v
		}
	}
	n := 1
	for _, v := range enc {
		n += binary.MaxVarintLen64 + len(v)
	}
	out := make([]byte, 1, n)
	out[0] = messageFormat
	for _, v := range enc {
		out = binary.AppendUvarint(out, uint64(len(v)))
		out = append(out, v...)
	}
	return out, nil
}

// eachEnvelope calls fn with each stored envelope of a batch message.
func eachEnvelope(body []byte, fn func(raw []byte) error) error {
	if len(body) == 0 || body[0] != messageFormat {
		return fmt.Errorf("%w: unknown format", ErrMessage)
	}
	rest := body[1:]
	for len(rest) > 0 {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return fmt.Errorf("%w: torn envelope", ErrMessage)
		}
		if err := fn(rest[k : k+int(n)]); err != nil {
			return err
		}
		rest = rest[k+int(n):]
	}
	return nil
}
