package projections

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"taskledger/ledger"
)

// Soft idempotency records: the outcomes recorded beside the chain rather
// than as events — a claim-next answered 204 "no task", and a running
// heartbeat that left the step unchanged. Unlike event records, they
// expire on their own clock: a record recorded at At is answered until
// the command time (the injected clock, never below the head) reaches
// At + retention; from then on it is forgotten entirely (no tombstone),
// and a request with its key is decided afresh. The collector
// (commands.CollectSoft) drops expired records from memory and deletes
// them from the soft bucket in the same batch, so memory and disk hold the
// same records and a fleet that only polls stays at a bounded size.

// softSet is the in-memory set of soft idempotency records, each kept in
// its compact encoding (EncodeSoftIdem: a fraction of an IdemRecord's
// heap) and decoded when a replay needs it.
type softSet struct {
	recs  map[string]string // by IdemID: the record's compact encoding
	order []softEntry       // every record as recorded, oldest first
	peak  int               // the most records recs held since it was last rebuilt
	// legacy holds the ids whose record a ledger stored under its id
	// alone (SoftIdemPrefix, before keys were ordered by time).
	legacy map[string]bool
}

// softEntry is one recorded soft record: its id and the time it was
// recorded (an entry whose record was since replaced is stale).
type softEntry struct {
	id string
	at int64
}

// PutSoft records an outcome kept as a soft record (recorded now, or
// loaded from the soft bucket); raw is its EncodeSoftIdem encoding.
func (v *IdemView) PutSoft(r *IdemRecord, raw []byte) {
	v.putSoft(r, raw, false)
}

// putSoft is PutSoft for a record stored under SoftIdemKey (legacy: under
// SoftIdemPrefix + its id).
func (v *IdemView) putSoft(r *IdemRecord, raw []byte, legacy bool) {
	s := &v.soft
	if s.recs == nil {
		s.recs = map[string]string{}
	}
	id := IdemID(r.Scope, r.Key)
	s.recs[id] = string(raw)
	s.order = append(s.order, softEntry{id: id, at: r.At})
	s.peak = max(s.peak, len(s.recs))
	switch {
	case legacy:
		if s.legacy == nil {
			s.legacy = map[string]bool{}
		}
		s.legacy[id] = true
	case s.legacy != nil:
		delete(s.legacy, id)
	}
}

// SoftKey returns the soft-bucket key the soft record of id is stored
// under, if the view holds one (expired or not).
func (v *IdemView) SoftKey(id string) (string, bool) {
	raw, ok := v.soft.recs[id]
	switch {
	case !ok:
		return "", false
	case v.soft.legacy[id]:
		return SoftIdemPrefix + id, true
	}
	return SoftIdemKey(id, softAt(raw)), true
}

// SoftLookup returns the soft record of (scope, key) while it is within
// retention at now (the command's time), else nil: an expired soft record
// is forgotten, not tombstoned. retention <= 0 never expires.
func (v *IdemView) SoftLookup(scope, key string, now, retention int64) (*IdemRecord, error) {
	raw, ok := v.softRaw(scope, key)
	if !ok || softExpired(softAt(raw), now, retention) {
		return nil, nil
	}
	return decodeCompact(scope, key, []byte(raw))
}

// SoftExpired reports whether (scope, key) has a soft record that is held
// (not collected yet) but expired at now: its key is known to have been
// answered, and is past retention.
func (v *IdemView) SoftExpired(scope, key string, now, retention int64) bool {
	raw, ok := v.softRaw(scope, key)
	return ok && softExpired(softAt(raw), now, retention)
}

// softRaw returns the compact encoding of (scope, key)'s soft record, if
// one is held, without building its id.
func (v *IdemView) softRaw(scope, key string) (string, bool) {
	var buf idemIDBuf
	raw, ok := v.soft.recs[string(appendIdemID(buf[:0], scope, key))]
	return raw, ok
}

// SoftCount is the number of soft idempotency records held in memory
// (expired ones included until they are collected).
func (v *IdemView) SoftCount() int { return len(v.soft.recs) }

// ExpiredSoft lists, oldest first, the ids of at most limit soft records
// expired at now, without changing anything: the ones DropExpiredSoft
// with the same arguments drops.
func (v *IdemView) ExpiredSoft(now, retention int64, limit int) []string {
	var ids []string
	v.soft.walk(now, retention, limit, func(id string) { ids = append(ids, id) })
	return ids
}

// DropExpiredSoft forgets at most limit soft records expired at now,
// oldest first, and returns how many it dropped.
func (v *IdemView) DropExpiredSoft(now, retention int64, limit int) int {
	s := &v.soft
	dropped := 0
	n := s.walk(now, retention, limit, func(id string) {
		delete(s.recs, id)
		delete(s.legacy, id)
		dropped++
	})
	s.order = s.order[n:]
	switch {
	case len(s.order) == 0:
		s.order = nil
	case cap(s.order) > 1024 && len(s.order) < cap(s.order)/4:
		s.order = append([]softEntry(nil), s.order...) // give the old array back
	}
	if s.peak > 1024 && len(s.recs) < s.peak/4 {
		// Maps never shrink: copy the survivors into one sized for them.
		m := make(map[string]string, len(s.recs))
		for id, r := range s.recs {
			m[id] = r
		}
		s.recs, s.peak = m, len(m)
	}
	return dropped
}

// walk calls fn for each expired record, oldest first, at most limit
// times, and returns how many entries of order it went past (stale
// entries of replaced records included). Records are recorded in time
// order (the command time never goes below the head), so the walk stops
// at the first entry still within retention.
func (s *softSet) walk(now, retention int64, limit int, fn func(id string)) int {
	if retention <= 0 {
		return 0
	}
	n, found := 0, 0
	for n < len(s.order) && found < limit {
		e := s.order[n]
		if !softExpired(e.at, now, retention) {
			break
		}
		if raw, ok := s.recs[e.id]; ok && softAt(raw) == e.at {
			fn(e.id)
			found++
		}
		n++
	}
	return n
}

func softExpired(at, now, retention int64) bool {
	return retention > 0 && at+retention <= now
}

// softAt is the recording time of a compact encoding (PutSoft only holds
// valid ones).
func softAt(raw string) int64 {
	if len(raw) < 10 {
		return 0
	}
	return int64(binary.BigEndian.Uint64([]byte(raw[2:10])))
}

// SoftIdemAtPrefix starts the soft-bucket key of every soft idempotency
// record: SoftIdemKey. Ledgers written before hold some under
// SoftIdemPrefix + IdemID(scope, key); they are read, and deleted when
// collected, under that key.
const SoftIdemAtPrefix = softIdemAt

// SoftIdemPrefix starts the key of a soft idempotency record stored by
// its id alone (before SoftIdemAtPrefix).
const SoftIdemPrefix = softIdem

// SoftIdemKey is the soft-bucket key of the soft idempotency record of id
// recorded at at: SoftIdemAtPrefix, at as 16 hex digits, "/", the id.
// Records are recorded in time order, so each batch's land together at
// the end of the bucket's B+tree (keyed by id, random idempotency keys
// spread them over its leaves: a page written per record).
func SoftIdemKey(id string, at int64) string {
	b := make([]byte, 0, len(softIdemAt)+17+len(id))
	b = append(b, softIdemAt...)
	b = fmt.Appendf(b, "%016x/", uint64(at))
	return string(append(b, id...))
}

// softIdemID returns the id of a soft idempotency record's key (either
// form) and, for a key ordered by time, its time.
func softIdemID(key string) (id string, at int64, timed, ok bool) {
	if rest, found := strings.CutPrefix(key, softIdemAt); found {
		if len(rest) < 17 || rest[16] != '/' {
			return "", 0, false, false
		}
		u, err := strconv.ParseUint(rest[:16], 16, 64)
		if err != nil {
			return "", 0, false, false
		}
		return rest[17:], int64(u), true, true
	}
	id, found := strings.CutPrefix(key, softIdem)
	return id, 0, false, found
}

// softFormat is the first byte of the compact encoding of a soft
// idempotency record (older records are msgpack maps, whose first byte is
// never 0x01).
const softFormat = 0x01

// EncodeSoftIdem is the compact, fixed encoding of a soft idempotency
// record (its scope and key are in the soft-bucket key):
//
//	0x01 | outcome (1 byte) | at (8 bytes, big-endian Unix ms)
//	| fingerprint, device_id, task_id (each: uvarint length + bytes)
//	| 0 (no reply) or 1 and the reply: task_id, state, execution_id, step
//	  (uvarint length + bytes), version, claim_generation (uvarint),
//	  server_time, lease_expires_at (varint), cancel_requested (1 byte)
//
// Fields soft records never hold (seq, event type, code, the claim and
// evidence fields of a reply) are refused.
func EncodeSoftIdem(r *IdemRecord) ([]byte, error) {
	if r.Seq != 0 || r.EventType != "" || r.Code != "" || r.Outcome == OutcomeNone {
		return nil, fmt.Errorf("projections: record %s/%s cannot be kept as a soft record", r.Scope, r.Key)
	}
	b := make([]byte, 0, 96)
	b = append(b, softFormat, byte(r.Outcome))
	b = binary.BigEndian.AppendUint64(b, uint64(r.At))
	b = appendField(b, string(r.Fingerprint))
	b = appendField(b, r.DeviceID)
	b = appendField(b, r.TaskID)
	p := r.Reply
	if p == nil {
		return append(b, 0), nil
	}
	if p.SessionID != "" || p.TokenOrigin != "" || p.Nonce != "" || p.AuthorizationID != "" ||
		p.AuthorizationExpiresAt != 0 || p.Evidence != nil {
		return nil, fmt.Errorf("projections: the reply of %s/%s cannot be kept in a soft record", r.Scope, r.Key)
	}
	b = append(b, 1)
	for _, f := range []string{p.TaskID, p.State, p.ExecutionID, p.Step} {
		b = appendField(b, f)
	}
	b = binary.AppendUvarint(b, p.Version)
	b = binary.AppendUvarint(b, p.Generation)
	b = binary.AppendVarint(b, p.ServerTime)
	b = binary.AppendVarint(b, p.LeaseExpiresAt)
	if p.CancelRequested {
		return append(b, 1), nil
	}
	return append(b, 0), nil
}

func appendField(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// DecodeSoftIdem reads the soft idempotency record stored under key
// (SoftIdemKey, or SoftIdemPrefix + scope + "\x00" + key): the compact encoding, or the
// msgpack record of older ledgers. Damage is ledger.ErrCorrupt.
func DecodeSoftIdem(key string, v []byte) (*IdemRecord, error) {
	if len(v) == 0 || v[0] != softFormat {
		return decodeLegacySoftIdem(v)
	}
	id, at, timed, ok := softIdemID(key)
	scope, k, found := strings.Cut(id, "\x00")
	if !ok || !found {
		return nil, fmt.Errorf("%w: soft idempotency record under key %q", ledger.ErrCorrupt, key)
	}
	r, err := decodeCompact(scope, k, v)
	if err == nil && timed && r.At != at {
		return nil, fmt.Errorf("%w: soft idempotency record of %d under key %q", ledger.ErrCorrupt, r.At, key)
	}
	return r, err
}

// decodeCompact reads the compact encoding v of the record of (scope, k).
func decodeCompact(scope, k string, v []byte) (*IdemRecord, error) {
	if len(v) == 0 || v[0] != softFormat {
		return nil, fmt.Errorf("%w: soft idempotency record %s/%s", ledger.ErrCorrupt, scope, k)
	}
	d := softDec{b: v[1:]}
	r := &IdemRecord{Scope: scope, Key: k, Outcome: Outcome(d.byte())}
	r.At = int64(d.uint64())
	if fp := d.field(); fp != "" {
		r.Fingerprint = []byte(fp)
	}
	r.DeviceID, r.TaskID = d.field(), d.field()
	switch d.byte() {
	case 0:
	case 1:
		p := &Reply{TaskID: d.field(), State: d.field(), ExecutionID: d.field(), Step: d.field()}
		p.Version, p.Generation = d.uvarint(), d.uvarint()
		p.ServerTime, p.LeaseExpiresAt = d.varint(), d.varint()
		switch d.byte() {
		case 0:
		case 1:
			p.CancelRequested = true
		default:
			d.bad = true
		}
		r.Reply = p
	default:
		d.bad = true
	}
	if d.bad || len(d.b) != 0 || r.Outcome == OutcomeNone || r.Outcome > OutcomeRefused {
		return nil, fmt.Errorf("%w: soft idempotency record %s/%s", ledger.ErrCorrupt, scope, k)
	}
	return r, nil
}

// softDec reads the compact encoding; any short or malformed read sets bad.
type softDec struct {
	b   []byte
	bad bool
}

func (d *softDec) byte() byte {
	if len(d.b) < 1 {
		d.bad = true
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *softDec) uint64() uint64 {
	if len(d.b) < 8 {
		d.bad = true
		return 0
	}
	x := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return x
}

func (d *softDec) uvarint() uint64 {
	x, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return x
}

func (d *softDec) varint() int64 {
	x, n := binary.Varint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return x
}

func (d *softDec) field() string {
	n := d.uvarint()
	if d.bad || n > uint64(len(d.b)) {
		d.bad = true
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// decodeLegacySoftIdem reads a soft idempotency record written as a
// msgpack IdemRecord (before the compact encoding).
func decodeLegacySoftIdem(v []byte) (*IdemRecord, error) {
	var r IdemRecord
	if err := ledger.Unmarshal(v, &r); err != nil {
		return nil, fmt.Errorf("%w: idempotency record: %v", ledger.ErrCorrupt, err)
	}
	if r.Outcome == OutcomeNone {
		if err := legacyOutcome(v, &r); err != nil {
			return nil, err
		}
	}
	return &r, nil
}
