package projections

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
}

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

// record decodes record i (checked when the section was loaded).
func (l *loadedRecords) record(i int) *IdemRecord {
	var dst idemRecordDec
	return dst.read(l.reader(i))
}

// find returns the index of the record with this id, or -1.
func (l *loadedRecords) find(id string) int {
	qs, qk := splitIdemID(id)
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

// loadedRecord returns the loaded record with this id that has not
// expired, or nil.
func (v *IdemView) loadedRecord(id string) *IdemRecord {
	l := v.loaded
	if l == nil {
		return nil
	}
	i := l.find(id)
	if i < 0 || int(l.first[i]) < v.next {
		return nil
	}
	return l.record(i)
}

// expireLoaded expires loaded records from the front of their order, as
// expireFront does for the records added since (which all come later),
// and reports whether it went through the whole order.
func (v *IdemView) expireLoaded(headAt, retention int64) bool {
	l := v.loaded
	for v.next < len(l.order) {
		id, i := l.entry(v.next)
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
		}
		v.next++
	}
	return true
}

// allRecords returns every record that has not expired, by id: the ones
// added since the load and the loaded ones they do not replace.
func (v *IdemView) allRecords() map[string]*IdemRecord {
	m := make(map[string]*IdemRecord, len(v.Records))
	if l := v.loaded; l != nil {
		for i := range l.off {
			if int(l.first[i]) >= v.next {
				m[l.id(i)] = l.record(i)
			}
		}
	}
	for id, r := range v.Records {
		m[id] = r
	}
	return m
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
