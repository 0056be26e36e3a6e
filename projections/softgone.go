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
// A fresh key matches one only by a 64-bit collision. The fingerprints are
// kept for one more retention (D325): a poll-only fleet holds at most two
// retentions' worth of its polls, so memory and disk stay bounded; a key
// replayed more than twice the retention after its poll is decided afresh.

// softGone is the prefix of the soft records of collected fingerprints.
const softGone = "idemgone/"

// SoftGoneKey is the soft-record key of the fingerprints one collect at
// now wrote (seq orders collects of the same millisecond).
func SoftGoneKey(now int64, seq int) string {
	return fmt.Sprintf("%s%020d/%06d", softGone, now, seq)
}

// goneBatch is one collect's fingerprints: its soft record's key and time.
type goneBatch struct {
	key string
	at  int64
	fps []uint64
}

// GoneFingerprint is the 8-byte fingerprint of an idempotency id.
func GoneFingerprint(id string) uint64 {
	return goneFingerprint([]byte(id))
}

func goneFingerprint(id []byte) uint64 {
	h := sha256.Sum256(id)
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

// NextGoneKey is the soft-record key for the fingerprints a collect at now
// writes.
func (v *IdemView) NextGoneKey(now int64) string { return SoftGoneKey(now, v.goneSeq) }

// AddGone records the fingerprints a collect at at wrote under key.
func (v *IdemView) AddGone(key string, at int64, fps []uint64) {
	if v.gone == nil {
		v.gone = make(map[uint64]struct{}, len(fps))
	}
	for _, f := range fps {
		v.gone[f] = struct{}{}
	}
	v.goneBatches = append(v.goneBatches, goneBatch{key: key, at: at, fps: fps})
	v.goneSeq++
}

// ExpiredGone lists the soft-record keys of the fingerprints collected at
// or before now-horizon, oldest first.
func (v *IdemView) ExpiredGone(now, horizon int64) []string {
	var keys []string
	for _, b := range v.goneBatches {
		if b.at > now-horizon {
			break
		}
		keys = append(keys, b.key)
	}
	return keys
}

// DropExpiredGone forgets the fingerprints ExpiredGone lists.
func (v *IdemView) DropExpiredGone(now, horizon int64) {
	n := 0
	for _, b := range v.goneBatches {
		if b.at > now-horizon {
			break
		}
		for _, f := range b.fps {
			delete(v.gone, f)
		}
		n++
	}
	v.goneBatches = append(v.goneBatches[:0:0], v.goneBatches[n:]...)
}

// Gone reports whether (scope, key) is a collected claim-next "no task"
// key.
func (v *IdemView) Gone(scope, key string) bool {
	var buf idemIDBuf
	_, ok := v.gone[goneFingerprint(appendIdemID(buf[:0], scope, key))]
	return ok
}

// GoneCount is the number of collected fingerprints held.
func (v *IdemView) GoneCount() int { return len(v.gone) }

// loadGone loads the collected fingerprints from the soft bucket (keys in
// time order).
func (s *State) loadGone(src Source) error {
	return src.SoftRecords(softGone, func(key string, v []byte) error {
		var at int64
		var seq int
		if _, err := fmt.Sscanf(strings.TrimPrefix(key, softGone), "%d/%d", &at, &seq); err != nil || len(v)%8 != 0 {
			return fmt.Errorf("%w: collected keys %s: %d bytes", ledger.ErrCorrupt, key, len(v))
		}
		fps := make([]uint64, len(v)/8)
		for i := range fps {
			fps[i] = binary.BigEndian.Uint64(v[8*i:])
		}
		s.Idem.AddGone(key, at, fps)
		return nil
	})
}
