package projections

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"

	"taskledger/ledger"
)

// Collected "no task" keys. A claim-next answered 204 is a soft record
// that the collector deletes once it is past retention; its key must still
// answer 409 idempotency_key_expired afterwards, never a claim (D322).
// Keys are UUIDv4, so nothing about a key tells its age: the collector
// keeps, for each claim-next record it drops, an 8-byte fingerprint of its
// scope and key (a tenth of the record), written as one soft record per
// collect (SoftGoneKey) in the same batch as the deletes, loaded at start.
// A fresh key matches one only by a 64-bit collision.

// softGone is the prefix of the soft records of collected fingerprints.
const softGone = "idemgone/"

// SoftGoneKey is the soft-record key of the fingerprints one collect at
// now wrote (seq orders collects of the same millisecond).
func SoftGoneKey(now int64, seq int) string {
	return fmt.Sprintf("%s%020d/%06d", softGone, now, seq)
}

// GoneFingerprint is the 8-byte fingerprint of an idempotency id.
func GoneFingerprint(id string) uint64 {
	h := sha256.Sum256([]byte(id))
	return binary.BigEndian.Uint64(h[:8])
}

// IsClaimNextID reports whether an idempotency id is a claim-next's.
func IsClaimNextID(id string) bool {
	scope, _, _ := strings.Cut(id, "\x00")
	return strings.HasSuffix(scope, ":claim-next")
}

// EncodeGone encodes fingerprints as a soft record's value.
func EncodeGone(fps []uint64) []byte {
	b := make([]byte, 0, 8*len(fps))
	for _, f := range fps {
		b = binary.BigEndian.AppendUint64(b, f)
	}
	return b
}

// AddGone records collected fingerprints.
func (v *IdemView) AddGone(fps []uint64) {
	if v.gone == nil {
		v.gone = make(map[uint64]struct{}, len(fps))
	}
	for _, f := range fps {
		v.gone[f] = struct{}{}
	}
}

// Gone reports whether (scope, key) is a collected claim-next "no task"
// key.
func (v *IdemView) Gone(scope, key string) bool {
	_, ok := v.gone[GoneFingerprint(IdemID(scope, key))]
	return ok
}

// GoneCount is the number of collected fingerprints held.
func (v *IdemView) GoneCount() int { return len(v.gone) }

// loadGone loads the collected fingerprints from the soft bucket.
func (s *State) loadGone(src Source) error {
	return src.SoftRecords(softGone, func(key string, v []byte) error {
		if len(v)%8 != 0 {
			return fmt.Errorf("%w: collected keys %s: %d bytes", ledger.ErrCorrupt, key, len(v))
		}
		fps := make([]uint64, len(v)/8)
		for i := range fps {
			fps[i] = binary.BigEndian.Uint64(v[8*i:])
		}
		s.Idem.AddGone(fps)
		return nil
	})
}
