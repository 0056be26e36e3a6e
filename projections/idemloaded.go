package projections

import (
	"errors"
	"fmt"
)

// loadedRecords are the idempotency records a snapshot held, left in the
// snapshot's encoding (the idem section, contentidem.go) and decoded one
// at a time when looked up: start-up from a snapshot of millions of
// records builds no map and allocates no record. It never changes once
// loaded, so captures share it; which records are still alive is the
// owning IdemView's next (expiry only ever pops the front of the order).
type loadedRecords struct {
	sec   string   // the idem section
	tab   []string // its interned strings
	off   []int    // where record i starts; records sorted by id
	order []int32  // the expiry order: record index, or -1-k for bare[k]
	bare  []string // ids in the order without a record
	// first is the first position of record i in order (len(order) when
	// the order does not name it): record i has expired once next passes
	// it.
	first []int32
	// ref: the section names each record by its seq (scope, key, time and
	// seq); the record itself is its row in the read model's records
	// bucket (D462). own holds, by order position, an entry's own
	// record's seq where it is not its id's record (an id recorded twice).
	ref bool
	own map[int32]uint64
}

// errNoReadModel: a record a snapshot names by seq is looked up where no
// read model is attached.
var errNoReadModel = errors.New("projections: an idempotency record is on disk and no read model is attached")

// reader returns a decoder positioned on record i's fields.
func (l *loadedRecords) reader(i int) *decBuf {
	d := &decBuf{s: l.sec, p: l.off[i], tab: l.tab}
	d.uv() // the record's length
	return d
}

// id returns record i's id.
func (l *loadedRecords) id(i int) string {
	scope, key := scopeKey(l.reader(i))
	return IdemID(scope, key.String())
}

// at returns record i's time.
func (l *loadedRecords) at(i int) int64 {
	d := l.reader(i)
	scopeKey(d)
	return d.sv()
}

// short returns record i's scope, key, time and seq.
func (l *loadedRecords) short(i int) (scope string, key idemKey, at int64, seq uint64) {
	d := l.reader(i)
	scope, key = scopeKey(d)
	at = d.sv()
	return scope, key, at, d.uv()
}

// ownSeq is the seq of the record the entry at order position p recorded
// (i is the record its id had when encoded, -1 for none; 0: none known).
func (l *loadedRecords) ownSeq(p, i int) uint64 {
	if s, ok := l.own[int32(p)]; ok {
		return s
	}
	if i < 0 {
		return 0
	}
	_, _, _, seq := l.short(i)
	return seq
}

// record decodes record i (checked when the section was loaded); in a
// section that names records by seq it reads its row from f.
func (l *loadedRecords) record(i int, f FinishedStore) (*IdemRecord, error) {
	if !l.ref {
		var dst idemRecordDec
		return dst.read(l.reader(i)), nil
	}
	scope, key, _, seq := l.short(i)
	if f == nil {
		return nil, errNoReadModel
	}
	row, err := f.ReadModelGet(RMRecords, u64key(seq))
	if err != nil {
		return nil, err
	}
	if row == nil {
		return nil, fmt.Errorf("projections: the idempotency record of seq %d is missing from the read model", seq)
	}
	r, err := decodeRecordRow(string(row))
	if err != nil {
		return nil, err
	}
	if r.Seq != seq || cmpScopeKeys(r.Scope, keyOf(r.Key), scope, key) != 0 {
		return nil, fmt.Errorf("projections: the read model's idempotency record of seq %d is another record", seq)
	}
	return r, nil
}

// find returns the index of the record with this id, or -1.
func (l *loadedRecords) find(qs string, qk idemKey) int {
	i, j := 0, len(l.off)
	for i < j {
		h := int(uint(i+j) >> 1)
		if scope, key := scopeKey(l.reader(h)); cmpScopeKeys(qs, qk, scope, key) > 0 {
			i = h + 1
		} else {
			j = h
		}
	}
	if i < len(l.off) {
		if scope, key := scopeKey(l.reader(i)); cmpScopeKeys(qs, qk, scope, key) == 0 {
			return i
		}
	}
	return -1
}

// entry returns the id at position p of the order and its record index
// (-1 for a bare id).
func (l *loadedRecords) entry(p int) (string, int) {
	e := l.order[p]
	if e < 0 {
		return l.bare[-1-e], -1
	}
	return l.id(int(e)), int(e)
}

// loadedRecordOf returns the loaded record of (scope, key) that has not
// expired, or nil.
func (v *IdemView) loadedRecordOf(scope, key string) (*IdemRecord, error) {
	l := v.loaded
	if l == nil {
		return nil, nil
	}
	i := l.find(scope, keyOf(key))
	if i < 0 || int(l.first[i]) < v.next {
		return nil, nil
	}
	return l.record(i, v.finished)
}

// expireLoaded expires loaded records from the front of their order, as
// expireFront does for the records added since (which all come later),
// and reports whether it went through the whole order.
func (v *IdemView) expireLoaded(headAt, retention int64) bool {
	l := v.loaded
	for v.next < len(l.order) {
		id, i := l.entry(v.next)
		own := l.ownSeq(v.next, i)      // the entry's own record: its row goes as the entry leaves
		if r, ok := v.Records[id]; ok { // put again since the load (never by commands)
			if r.At+retention > headAt {
				return false
			}
			v.drop(id, r, nil)
		} else if i >= 0 && int(l.first[i]) == v.next {
			if l.at(i)+retention > headAt {
				return false
			}
			v.tombstone(id)
			if _, _, _, seq := l.short(i); seq != own {
				v.rowDel(seq)
			}
		}
		if own != 0 {
			v.rowDel(own)
		}
		v.next++
	}
	return true
}

// allRecords returns every record that has not expired, by id: the ones
// added since the load and the loaded ones they do not replace.
func (v *IdemView) allRecords() (map[string]*IdemRecord, error) {
	m := make(map[string]*IdemRecord, len(v.Records))
	if l := v.loaded; l != nil {
		for i := range l.off {
			if int(l.first[i]) >= v.next {
				r, err := l.record(i, v.finished)
				if err != nil {
					return nil, err
				}
				m[l.id(i)] = r
			}
		}
	}
	for id, r := range v.Records {
		m[id] = r
	}
	return m, nil
}

// fullOrder returns the expiry order: the loaded one from next on, then
// the ids added since.
func (v *IdemView) fullOrder() []string {
	var o []string
	if l := v.loaded; l != nil {
		for p := v.next; p < len(l.order); p++ {
			id, _ := l.entry(p)
			o = append(o, id)
		}
	}
	for _, e := range v.Order {
		o = append(o, e.ID)
	}
	return o
}
