package ledger

import (
	"bytes"

	"github.com/vmihailenco/msgpack/v5"
)

// MarshalArrays encodes v like Marshal, but every struct as an array of
// its field values in declaration order instead of a map keyed by field
// name: about a third smaller and faster to encode and decode. Decoding
// (Unmarshal) accepts both forms; an array whose length is not the
// struct's field count is refused, so a struct that gained or lost a field
// never silently decodes an older document. Snapshot content uses it; the
// log does not (its envelopes keep field names forever).
func MarshalArrays(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(&buf)
	enc.UseCompactInts(true)
	enc.SetSortMapKeys(true)
	enc.UseArrayEncodedStructs(true)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
