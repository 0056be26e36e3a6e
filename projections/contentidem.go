package projections

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"taskledger/ledger"
)

// The idem section of the content (content.go):
//
//	table    count, then the strings records refer to by index
//	records  count, then every record not expired, by id (strictly
//	         ascending; the id is scope + "\x00" + key), each its length
//	         and its fields: scope*, key+, at, seq, fingerprint, event
//	         type*, status, code*, task id+, device id*, a reply flag and
//	         the reply (flags, task id+ when not the record's, state*,
//	         version, generation, execution id+, server time, lease,
//	         step*, session id+, token origin*, nonce+, authorization id+
//	         and expiry, the evidence when flagged: id+, execution id+,
//	         sha256, size, kind*, captured)
//	order    count, then the expiry order (records by time): per entry the
//	         record's index + 1, or 0 and an id without a record
//
// (* a table index; + encBuf.ustr: a canonical UUID in its 16 bytes.)
// Records are self-contained and sorted by id, so a loaded section stays
// as it is and a record is found by binary search and decoded when looked
// up (idemloaded.go); a key kept in 16 bytes sorts as its text does
// (idemKey). Version 6 wrote the scope's length and the whole id in place
// of scope and key, and every + field as a plain string: about 215 bytes
// a record where version 7 takes about 135 (a device's scope,
// "device:<id>:<operation>", repeats in every record of its kind) and
// version 8, whose key (a UUID: the contract's Idempotency-Key) takes 16
// bytes instead of 37, about 115.

// Reply flags.
const (
	rfOtherTask = 1 << iota // the reply's task_id is not the record's
	rfCancelRequested
	rfEvidence
)

// tabEnc is an encBuf whose repeated strings go to a table written
// before the records.
type tabEnc struct {
	*encBuf
	idx map[string]uint64
	tab []string
}

func (e *tabEnc) t(s string) {
	if e.idx == nil { // one record's table: a few strings
		i := slices.Index(e.tab, s)
		if i < 0 {
			i = len(e.tab)
			e.tab = append(e.tab, s)
		}
		e.uv(uint64(i))
		return
	}
	i, ok := e.idx[s]
	if !ok {
		i = uint64(len(e.tab))
		e.idx[s] = i
		e.tab = append(e.tab, s)
	}
	e.uv(i)
}

// encodeIdem writes the idem section of a capture: the records recorded
// since the load (the captured order) and the loaded records from
// position next of their order on.
func encodeIdem(c *idemCapture, ref bool) ([]byte, error) {
	live := c.liveGroups()
	l := c.loaded
	var nLoaded, loadedSize int
	if l != nil {
		nLoaded, loadedSize = len(l.off), len(l.sec)
	}
	// Sized for a node's records (about 115 bytes each, and the loaded
	// ones as they were) so that the buffer is not copied as it grows.
	rec := newEncBuf(len(c.order)*160 + loadedSize)
	one := &tabEnc{encBuf: newEncBuf(512), idx: map[string]uint64{}} // one record at a time
	newIdx := make([]int32, nLoaded)
	n := 0
	put := func(id string, r *IdemRecord) {
		yieldEvery(n)
		one.b = one.b[:0]
		if ref {
			one.recordRef(id, r)
		} else {
			one.record(id, r)
		}
		rec.uv(uint64(len(one.b)))
		rec.b = append(rec.b, one.b...)
		n++
	}
	putLive := func(g *liveGroup) {
		if g.rec != nil {
			g.k = int32(n)
			put(g.id, g.rec)
		}
	}
	j := 0
	for i := 0; i < nLoaded; i++ {
		if int(l.first[i]) < c.next {
			newIdx[i] = -1
			continue
		}
		id := l.id(i)
		for j < len(live) && live[j].id < id {
			putLive(&live[j])
			j++
		}
		if j < len(live) && live[j].id == id && live[j].rec != nil { // replaced since the load
			newIdx[i] = -1
			continue
		}
		newIdx[i] = int32(n)
		if ref { // its row is on disk: the fields a section keeps are enough
			scope, key, at, seq := l.short(i)
			yieldEvery(n)
			one.b = one.b[:0]
			one.ref(scope, key, at, seq)
			rec.uv(uint64(len(one.b)))
			rec.b = append(rec.b, one.b...)
			n++
			continue
		}
		r, err := l.record(i, c.finished)
		if err != nil {
			return nil, err
		}
		put(id, r)
	}
	for ; j < len(live); j++ {
		putLive(&live[j])
	}
	if one.err != nil {
		return nil, one.err
	}
	if n > math.MaxInt32-1 {
		return nil, fmt.Errorf("projections: encode: %d idempotency records", n)
	}
	ord, total := encodeIdemOrder(c, live, newIdx, ref)
	e := newEncBuf(len(rec.b) + len(ord) + 64*len(one.tab) + 4*binaryMaxVarint)
	e.flag(ref)
	e.uv(uint64(len(one.tab)))
	for _, s := range one.tab {
		e.str(s)
	}
	e.uv(uint64(n))
	e.b = append(e.b, rec.b...)
	e.uv(uint64(total))
	e.b = append(e.b, ord...)
	return e.b, e.err
}

// encodeIdemOrder writes the expiry order: per entry the index + 1 of its
// id's record in the section, or 0 and the id when the id has none.
func encodeIdemOrder(c *idemCapture, live []liveGroup, newIdx []int32, ref bool) ([]byte, int) {
	l := c.loaded
	nLoaded := 0
	if l != nil {
		nLoaded = len(l.order) - c.next
	}
	ord := newEncBuf(8 * (len(c.order) + nLoaded))
	// emit writes an entry: its id's record, and in a section that names
	// records by seq the entry's own record's seq when it is another one
	// (0 when the same or none: an id recorded twice, which only logs no
	// command writes hold).
	emit := func(id string, k int32, own, recSeq uint64) {
		if k >= 0 {
			ord.uv(uint64(k) + 1)
		} else {
			ord.uv(0)
			ord.str(id)
		}
		if ref {
			if own == recSeq {
				own = 0
			}
			ord.uv(own)
		}
	}
	var seqOf []uint64 // the seq of each encoded record, by index
	if ref {
		seqOf = make([]uint64, 0, len(newIdx)+len(live))
		for i, k := range newIdx {
			if k >= 0 {
				seqOf = growTo(seqOf, int(k))
				_, _, _, seqOf[k] = l.short(i)
			}
		}
		for gi := range live {
			if g := &live[gi]; g.k >= 0 {
				seqOf = growTo(seqOf, int(g.k))
				seqOf[g.k] = g.rec.Seq
			}
		}
	}
	recSeq := func(k int32) uint64 {
		if k < 0 || int(k) >= len(seqOf) {
			return 0
		}
		return seqOf[k]
	}
	for p := c.next; l != nil && p < len(l.order); p++ {
		id, i := l.entry(p)
		k := int32(-1)
		if i >= 0 {
			k = newIdx[i]
		}
		if k < 0 { // the id's record is a live one, or none
			if g := findGroup(live, id); g != nil {
				k = g.k
			}
		}
		var own uint64
		if ref {
			own = l.ownSeq(p, i)
		}
		emit(id, k, own, recSeq(k))
	}
	at := make([]int32, len(c.order))
	for gi := range live {
		for _, p := range live[gi].pos {
			at[p] = live[gi].k
		}
	}
	for p, e := range c.order {
		var own uint64
		if e.Rec != nil {
			own = e.Rec.Seq
		}
		emit(e.ID, at[p], own, recSeq(at[p]))
	}
	return ord.b, nLoaded + len(c.order)
}

// growTo returns s long enough to hold index i.
func growTo(s []uint64, i int) []uint64 {
	if i < len(s) {
		return s
	}
	return append(s, make([]uint64, i+1-len(s))...)
}

func (e *tabEnc) record(id string, r *IdemRecord) {
	if !isIdemID(id, r.Scope, r.Key) {
		e.fail("record %q is filed as %q", IdemID(r.Scope, r.Key), id)
		return
	}
	e.recordBody(r)
}

// recordBody writes a record (record checks first that it is filed
// under its own id).
func (e *tabEnc) recordBody(r *IdemRecord) {
	e.t(r.Scope)
	e.ustr(r.Key)
	e.sv(r.At)
	e.uv(r.Seq)
	e.bytes(r.Fingerprint)
	e.t(r.EventType)
	e.uv(uint64(r.Outcome))
	e.t(r.Code)
	e.ustr(r.TaskID)
	e.t(r.DeviceID)
	p := r.Reply
	e.flag(p != nil)
	if p == nil {
		return
	}
	var f uint64
	if p.TaskID != r.TaskID {
		f |= rfOtherTask
	}
	if p.CancelRequested {
		f |= rfCancelRequested
	}
	if p.Evidence != nil {
		f |= rfEvidence
	}
	e.uv(f)
	if f&rfOtherTask != 0 {
		e.ustr(p.TaskID)
	}
	e.t(p.State)
	e.uv(p.Version)
	e.uv(p.Generation)
	e.ustr(p.ExecutionID)
	e.tm(r.At, p.ServerTime)
	e.tm(p.ServerTime, p.LeaseExpiresAt)
	e.t(p.Step)
	e.ustr(p.SessionID)
	e.t(p.TokenOrigin)
	e.ustr(p.Nonce)
	e.ustr(p.AuthorizationID)
	e.tm(p.ServerTime, p.AuthorizationExpiresAt)
	if v := p.Evidence; v != nil {
		e.ustr(v.ID)
		e.ustr(v.ExecutionID)
		e.str(v.SHA256)
		e.sv(v.Size)
		e.t(v.Kind)
		e.tm(p.ServerTime, v.CapturedAt)
	}
}

// recordRef writes what a section that names records by seq keeps of a
// record: scope, key, time and seq (the first fields of record's
// encoding); the whole record is its row in the read model (recordRowEnc).
func (e *tabEnc) recordRef(id string, r *IdemRecord) {
	if !isIdemID(id, r.Scope, r.Key) {
		e.fail("record %q is filed as %q", IdemID(r.Scope, r.Key), id)
		return
	}
	e.ref(r.Scope, keyOf(r.Key), r.At, r.Seq)
}

func (e *tabEnc) ref(scope string, key idemKey, at int64, seq uint64) {
	e.t(scope)
	if key.u {
		e.uv(0)
		e.b = append(e.b, key.s...)
	} else {
		e.uv(uint64(len(key.s)) + 1)
		e.b = append(e.b, key.s...)
	}
	e.sv(at)
	e.uv(seq)
}

// recordRowEnc encodes record rows one after another, reusing its scratch:
// a rebuild writes a row for every record alive at the head.
type recordRowEnc struct {
	body, head *encBuf
	tab        tabEnc
}

func (x *recordRowEnc) write(r *IdemRecord) ledger.ReadModelWrite {
	if x.body == nil {
		x.body, x.head = &encBuf{b: make([]byte, 0, 192)}, &encBuf{b: make([]byte, 0, 96)}
		x.tab.encBuf = x.body
	}
	x.body.b, x.head.b, x.tab.tab = x.body.b[:0], x.head.b[:0], x.tab.tab[:0]
	x.tab.recordBody(r)
	x.head.uv(uint64(len(x.tab.tab)))
	for _, s := range x.tab.tab {
		x.head.str(s)
	}
	v := make([]byte, 0, len(x.head.b)+len(x.body.b))
	v = append(append(v, x.head.b...), x.body.b...)
	return ledger.ReadModelWrite{Bucket: RMRecords, Key: u64key(r.Seq), Value: v}
}

// decodeRecordRow decodes a row of the records bucket.
func decodeRecordRow(row string) (*IdemRecord, error) {
	d := &decBuf{s: row}
	n := d.n()
	if n > 64 {
		d.fail("record row table")
		return nil, d.err
	}
	d.tab = make([]string, n)
	for i := range d.tab {
		d.tab[i] = d.str()
	}
	var x idemRecordDec
	r := x.read(d)
	if d.err == nil && d.p != len(d.s) {
		d.fail("trailing bytes after a record row")
	}
	if d.err != nil {
		return nil, fmt.Errorf("projections: idempotency record row: %w", d.err)
	}
	return r, nil
}

// isIdemID reports whether id is IdemID(scope, key), without building it.
func isIdemID(id, scope, key string) bool {
	return len(id) == len(scope)+1+len(key) && id[:len(scope)] == scope && id[len(scope)] == 0 && id[len(scope)+1:] == key
}

// tabStr reads a table index.
func (d *decBuf) tabStr() string {
	i := d.uv()
	if i >= uint64(len(d.tab)) {
		d.fail("unknown table string")
		return ""
	}
	return d.tab[i]
}

// idemRecordDec decodes one record into its fields; lazy checks a record
// without building its UUIDs (the only strings decoding allocates).
type idemRecordDec struct {
	r    IdemRecord
	p    Reply
	ev   Evidence
	lazy bool
}

func (x *idemRecordDec) read(d *decBuf) *IdemRecord {
	_, _, fp := x.decode(d)
	r := x.r
	if fp != "" || x.r.Fingerprint != nil {
		r.Fingerprint = []byte(fp)
	}
	if x.r.Reply != nil {
		p := x.p
		if p.Evidence != nil {
			ev := x.ev
			p.Evidence = &ev
		}
		r.Reply = &p
	}
	return &r
}

// uid reads a string written with encBuf.ustr.
func (x *idemRecordDec) uid(d *decBuf) string {
	if x.lazy {
		d.skipUstr()
		return ""
	}
	return d.ustr()
}

// idemKey is a record's key as a section holds it: the 16 bytes of a
// canonical UUID (u), or the key's text. Canonical UUIDs (lowercase hex,
// hyphens at fixed places) sort as their bytes do, so keys compare
// without being built as text unless the two are held differently.
type idemKey struct {
	s string
	u bool
}

// keyOf is key as a section would hold it.
func keyOf(key string) idemKey {
	if u, ok := uuidBytes(key); ok {
		return idemKey{s: string(u[:]), u: true}
	}
	return idemKey{s: key}
}

// String is the key's text.
func (k idemKey) String() string {
	if k.u {
		return uuidString(k.s)
	}
	return k.s
}

// readKey reads a key written by encBuf.ustr without building it.
func (d *decBuf) readKey() idemKey {
	if n := d.uv(); n > 0 {
		return idemKey{s: d.raw(int(min(n-1, uint64(len(d.s)+1))))}
	}
	return idemKey{s: d.raw(16), u: true}
}

// cmpScopeKeys compares IdemID(s1, k1) with IdemID(s2, k2) without
// building either: when neither scope holds a zero byte (no scope the
// commands make does), ids sort by scope, then by key.
func cmpScopeKeys(s1 string, k1 idemKey, s2 string, k2 idemKey) int {
	if strings.IndexByte(s1, 0) >= 0 || strings.IndexByte(s2, 0) >= 0 {
		return strings.Compare(IdemID(s1, k1.String()), IdemID(s2, k2.String()))
	}
	if c := strings.Compare(s1, s2); c != 0 {
		return c
	}
	if k1.u == k2.u {
		return strings.Compare(k1.s, k2.s)
	}
	return strings.Compare(k1.String(), k2.String())
}

// scopeKey reads a record's scope (a table index) and key.
func scopeKey(d *decBuf) (scope string, key idemKey) { return d.tabStr(), d.readKey() }

// decode reads a record into x and returns its scope, its key and its
// fingerprint's bytes (x.r.Fingerprint only tells nil from not). Lazy, it
// leaves x.r.Key empty.
func (x *idemRecordDec) decode(d *decBuf) (scope string, key idemKey, fp string) {
	*x = idemRecordDec{lazy: x.lazy}
	r := &x.r
	scope, key = scopeKey(d)
	if d.err != nil {
		return "", idemKey{}, ""
	}
	r.Scope = scope
	if !x.lazy {
		r.Key = key.String()
	}
	r.At = d.sv()
	r.Seq = d.uv()
	if n := d.uv(); n > 0 {
		fp = d.raw(int(min(n-1, uint64(len(d.s)+1))))
		r.Fingerprint = []byte{}
	}
	r.EventType = d.tabStr()
	r.Outcome = Outcome(d.uv())
	r.Code = d.tabStr()
	r.TaskID = x.uid(d)
	r.DeviceID = d.tabStr()
	if !d.flag() {
		return scope, key, fp
	}
	p := &x.p
	f := d.uv()
	if f >= rfEvidence<<1 {
		d.fail("reply flags")
	}
	p.TaskID = r.TaskID
	if f&rfOtherTask != 0 {
		p.TaskID = x.uid(d)
	}
	p.CancelRequested = f&rfCancelRequested != 0
	p.State = d.tabStr()
	p.Version = d.uv()
	p.Generation = d.uv()
	p.ExecutionID = x.uid(d)
	p.ServerTime = d.tm(r.At)
	p.LeaseExpiresAt = d.tm(p.ServerTime)
	p.Step = d.tabStr()
	p.SessionID = x.uid(d)
	p.TokenOrigin = d.tabStr()
	p.Nonce = x.uid(d)
	p.AuthorizationID = x.uid(d)
	p.AuthorizationExpiresAt = d.tm(p.ServerTime)
	if f&rfEvidence != 0 {
		v := &x.ev
		v.ID = x.uid(d)
		v.ExecutionID = x.uid(d)
		v.SHA256 = d.str()
		v.Size = d.sv()
		v.Kind = d.tabStr()
		v.CapturedAt = d.tm(p.ServerTime)
		p.Evidence = v
	}
	r.Reply = p
	return scope, key, fp
}

// decodeOrder reads the expiry order of a section of n records.
func (l *loadedRecords) decodeOrder(d *decBuf, n int) error {
	no := d.n()
	if no >= math.MaxInt32 {
		d.fail("order length")
		return d.err
	}
	l.order = make([]int32, no)
	l.first = make([]int32, n)
	for i := range l.first {
		l.first[i] = int32(no)
	}
	for p := range l.order {
		k := d.uv()
		switch {
		case k == 0:
			l.bare = append(l.bare, d.str())
			l.order[p] = int32(-len(l.bare))
		case k <= uint64(n):
			l.order[p] = int32(k - 1)
			if l.first[k-1] == int32(no) {
				l.first[k-1] = int32(p)
			}
		default:
			d.fail("idempotency order entry")
		}
		if l.ref {
			if own := d.uv(); own != 0 {
				if l.own == nil {
					l.own = map[int32]uint64{}
				}
				l.own[int32(p)] = own
			}
		}
		if d.err != nil {
			return d.err
		}
	}
	if d.p != len(d.s) {
		d.fail("trailing bytes after the idempotency records")
	}
	return d.err
}

// decode loads an idem section: the table and the order are read, every
// record is checked (so a later lookup cannot fail) but left encoded.
func (v *IdemView) decode(sec string) error {
	d := &decBuf{s: sec}
	l := &loadedRecords{sec: sec}
	l.ref = d.flag()
	l.tab = make([]string, d.n())
	for i := range l.tab {
		l.tab[i] = d.str()
	}
	d.tab = l.tab
	n := d.n()
	if n >= math.MaxInt32 {
		d.fail("record count")
		return d.err
	}
	l.off = make([]int, n)
	x := idemRecordDec{lazy: true}
	var prevScope string
	var prevKey idemKey
	for i := range l.off {
		l.off[i] = d.p
		size := d.n()
		end := d.p + size
		var scope string
		var key idemKey
		if l.ref {
			scope, key = scopeKey(d)
			d.sv()
			d.uv()
		} else {
			scope, key, _ = x.decode(d)
		}
		if d.err == nil && d.p != end {
			d.fail("idempotency record length")
		}
		if d.err == nil && i > 0 && cmpScopeKeys(scope, key, prevScope, prevKey) <= 0 {
			d.fail("idempotency records out of order")
		}
		if d.err != nil {
			return d.err
		}
		prevScope, prevKey = scope, key
	}
	if err := l.decodeOrder(d, n); err != nil {
		return err
	}
	v.Records, v.Order, v.next = map[string]*IdemRecord{}, nil, 0
	if n > 0 || len(l.order) > 0 {
		v.loaded = l
	}
	return nil
}
