package projections

import (
	"crypto/sha256"
	"slices"

	"taskledger/ledger"
)

// Reply holds the values of a device answer as of the original command, so
// that a replay answers with exactly what was answered then.
type Reply struct {
	TaskID          string `msgpack:"task_id"`
	State           string `msgpack:"state"`
	Version         uint64 `msgpack:"version"`
	Generation      uint64 `msgpack:"claim_generation"`
	ExecutionID     string `msgpack:"execution_id"`
	ServerTime      int64  `msgpack:"server_time"`
	LeaseExpiresAt  int64  `msgpack:"lease_expires_at"`
	CancelRequested bool   `msgpack:"cancel_requested"`
	Step            string `msgpack:"step"`

	// claim-next only (the claimed task's payload, revision, creation time
	// and image are read from the task when answering: commands.ClaimedTask)
	SessionID              string `msgpack:"session_id"`
	TokenOrigin            string `msgpack:"token_origin"`
	Nonce                  string `msgpack:"nonce"`
	AuthorizationID        string `msgpack:"authorization_id"`
	AuthorizationExpiresAt int64  `msgpack:"authorization_expires_at"`

	// evidence only
	Evidence *Evidence `msgpack:"evidence"`
}

// IdemRecord is the recorded outcome of one idempotent request.
type IdemRecord struct {
	Scope       string  `msgpack:"scope"`
	Key         string  `msgpack:"key"`
	Fingerprint []byte  `msgpack:"fingerprint"`
	At          int64   `msgpack:"at"`
	Seq         uint64  `msgpack:"seq"`
	EventType   string  `msgpack:"event_type"`
	Outcome     Outcome `msgpack:"outcome"` // accepted, created, no task or refused
	Code        string  `msgpack:"code"`    // the refusal code of OutcomeRefused
	TaskID      string  `msgpack:"task_id"`
	DeviceID    string  `msgpack:"device_id"`
	Reply       *Reply  `msgpack:"reply"`
}

// IdemView holds the idempotency records still within retention and the
// tombstones of those that left it.
type IdemView struct {
	Records map[string]*IdemRecord `msgpack:"records"` // scope + "\x00" + key
	// Tombstones holds raw SHA-256 of scope + "\x00" + key: those not yet
	// in the read model on disk (made since the last hand-off, and those
	// of the batch handed last, until the next); all of them when nothing
	// drains them (no read model: KeepSettled, or a replay without disk).
	// filter holds every tombstone the log made, as bits: a key it rules
	// out never expired; one it does not is looked up on disk.
	Tombstones map[string]bool `msgpack:"tombstones"`
	// tombs lists the keys of Tombstones not yet drained, in the order
	// they were added (append only: a capture shares it, idemcapture.go).
	tombs     []string
	lastTombs []string // drained at the last hand-off
	filter    tombFilter
	finished  FinishedStore
	onTomb    func(t string) // RebuildSettling: hand tombstones over instead
	// Order is every record recorded since the load, in the order it was
	// recorded (by At), for expiry and captures: append only at the end,
	// popped at the front, so a capture shares it (idemcapture.go). An
	// entry's record is the one it recorded; Records holds the newest of
	// each id (an id is recorded again only by logs no command writes).
	Order []IdemEntry `msgpack:"order"`
	// dropped holds the records expiry removed from Records while a later
	// entry of the order still names them (an id recorded twice): a
	// capture leaves them out (idemcapture.go).
	dropped map[string]*IdemRecord
	// loaded are the records a snapshot held, still encoded (looked up
	// after Records); those before position next of their order have
	// expired. Records and Order hold the ones recorded since the load.
	loaded *loadedRecords
	next   int
	// soft holds the outcomes recorded as soft records ("no task" 204s,
	// quiet heartbeats): not from events, never in snapshots, expired on
	// their own clock (softidem.go).
	soft softSet
	// gone holds the 8-byte fingerprints of the claim-next "no task"
	// records the collector dropped (softgone.go), for one retention
	// after their collection: soft state, loaded from the soft bucket.
	gone map[uint64]struct{}
	// goneBatches are gone's soft records, oldest collection first.
	goneBatches []goneBatch
	goneSeq     int
	// expiredSince counts the records expired since the last shrink.
	expiredSince int
	// The read model's records bucket (RMRecords) holds, by seq, every
	// record from its put until its entry leaves the order (expiry), so
	// that a snapshot names records by seq instead of holding them
	// (D462). rmOn: the projections keep the bucket on disk, and
	// rmWrites are its writes since the last TakeReadModel. rows, when
	// not nil, follows the bucket through a replay instead (a rebuild
	// writes it, a verifier compares it).
	rmOn     bool
	rmWrites []ledger.ReadModelWrite
	rows     map[uint64]*IdemRecord
	// The rows of rmWrites are encoded off the caller (rowChunks): their
	// writes wait in rmWrites without a value until drainRecordWrites.
	rowRecs   []*IdemRecord // records whose row no chunk encodes yet
	rowAt     []int         // the index in rmWrites of each one's write
	rowChunks []*rowChunk
}

// rowChunkSize is how many record rows one goroutine encodes: the
// sequencer hands them on and decides on (encoding a row is about a
// tenth of a decision), and waits only for the ones not done when the
// batch is handed off.
const rowChunkSize = 32

// rowChunk is record rows being encoded by a goroutine of their own: the
// records (immutable once put) and where their values go in rmWrites.
type rowChunk struct {
	recs []*IdemRecord
	at   []int
	vals [][]byte
	done chan struct{}
}

func startRowChunk(recs []*IdemRecord, at []int) *rowChunk {
	c := &rowChunk{recs: recs, at: at, vals: make([][]byte, len(recs)), done: make(chan struct{})}
	go func() {
		var x recordRowEnc
		for i, r := range c.recs {
			c.vals[i] = x.write(r).Value
		}
		close(c.done)
	}()
	return c
}

func newIdemView() *IdemView {
	return &IdemView{
		Records:    map[string]*IdemRecord{},
		Tombstones: map[string]bool{},
	}
}

// IdemID is the id of a record: its scope and key.
func IdemID(scope, key string) string { return scope + "\x00" + key }

// idemIDBuf holds an id built for a lookup on the caller's stack (ids
// are usually shorter; a longer one grows onto the heap): a map indexed
// with string(b) does not copy b, so a lookup builds no string.
type idemIDBuf [128]byte

// appendIdemID appends IdemID(scope, key) to b.
func appendIdemID(b []byte, scope, key string) []byte {
	b = append(b, scope...)
	b = append(b, 0)
	return append(b, key...)
}

// Record returns the event-recorded record of (scope, key) held in
// memory (Records[IdemID(scope, key)]), without building its id.
func (v *IdemView) Record(scope, key string) *IdemRecord {
	var buf idemIDBuf
	return v.Records[string(appendIdemID(buf[:0], scope, key))]
}

// TombstoneID is the hash a tombstone keeps of scope and key.
func TombstoneID(id string) string {
	h := tombstoneSum([]byte(id))
	return string(h[:])
}

// tombstoneSum is TombstoneID's hash of an id's bytes, as an array (a
// lookup keeps it on its stack).
func tombstoneSum(id []byte) [sha256.Size]byte { return sha256.Sum256(id) }

// Lookup returns the event-recorded record of (scope, key), and whether
// the key's record has expired (tombstone). headAt is the newest event's
// time. Soft records are looked up with SoftLookup.
func (v *IdemView) Lookup(scope, key string, headAt, retention int64) (rec *IdemRecord, expired bool) {
	var buf idemIDBuf
	id := appendIdemID(buf[:0], scope, key)
	if r, ok := v.Records[string(id)]; ok {
		if r.At+retention <= headAt {
			return nil, true
		}
		return r, false
	}
	if r, err := v.loadedRecordOf(scope, key); err != nil {
		// The read model cannot be read (closed, or damaged): the answer
		// that changes nothing, as for a tombstone below.
		return nil, true
	} else if r != nil {
		if r.At+retention <= headAt {
			return nil, true
		}
		return r, false
	}
	if v.filter.empty() {
		return nil, false // nothing has expired yet: no hash to compute
	}
	t := tombstoneSum(id)
	if v.Tombstones[string(t[:])] {
		return nil, true
	}
	if v.finished == nil || !v.filter.mayHave(string(t[:])) {
		return nil, false
	}
	// The filter cannot rule it out: the read model's index says. (A read
	// of the mapped file fails only once it is closed: expired then, the
	// answer that changes nothing.)
	got, err := v.finished.ReadModelGet(RMTombstones, append([]byte(nil), t[:]...)) // a copy: t stays on the stack
	return nil, err != nil || got != nil
}

// IdemEntry is one recorded record in the expiry order: its id and the
// record (nil for an id named without a record).
type IdemEntry struct {
	ID  string
	Rec *IdemRecord
}

func (v *IdemView) put(r *IdemRecord) {
	id := IdemID(r.Scope, r.Key)
	r.Key = id[len(r.Scope)+1:] // the id holds the key: not twice in the heap
	v.Records[id] = r
	v.Order = append(v.Order, IdemEntry{ID: id, Rec: r})
	v.rowPut(r)
}

// rowPut and rowDel follow a record's row in the read model's records
// bucket (a delete of a row already gone changes nothing).
func (v *IdemView) rowPut(r *IdemRecord) {
	if v.rows != nil {
		v.rows[r.Seq] = r
	}
	if v.rmOn {
		v.rmWrites = append(v.rmWrites, ledger.ReadModelWrite{Bucket: RMRecords, Key: u64key(r.Seq)}) // its value: drainRecordWrites
		v.rowRecs = append(v.rowRecs, r)
		v.rowAt = append(v.rowAt, len(v.rmWrites)-1)
		if len(v.rowRecs) == rowChunkSize {
			v.rowChunks = append(v.rowChunks, startRowChunk(v.rowRecs, v.rowAt))
			v.rowRecs, v.rowAt = nil, nil
		}
	}
}

func (v *IdemView) rowDel(seq uint64) {
	if v.rows != nil {
		delete(v.rows, seq)
	}
	if v.rmOn {
		v.rmWrites = append(v.rmWrites, ledger.ReadModelWrite{Bucket: RMRecords, Key: u64key(seq)})
	}
}

// drainRecordWrites returns the records bucket's writes since the last
// drain, in the order they were made.
// The rows still being encoded are waited for; the last ones, fewer than
// a chunk, are encoded here.
func (v *IdemView) drainRecordWrites() []ledger.ReadModelWrite {
	ws := v.rmWrites
	for _, c := range v.rowChunks {
		<-c.done
		for i, at := range c.at {
			ws[at].Value = c.vals[i]
		}
	}
	var x recordRowEnc
	for i, r := range v.rowRecs {
		ws[v.rowAt[i]].Value = x.write(r).Value
	}
	v.rmWrites, v.rowRecs, v.rowAt, v.rowChunks = nil, nil, nil, nil
	return ws
}

// recordsOnDisk says that every record of the projections has its row on
// disk (a load checked the read model is at the head): from now on each
// put and expiry writes its row with the batch (TakeReadModel).
func (v *IdemView) recordsOnDisk() {
	v.rmOn, v.rmWrites, v.rows = true, nil, nil
	v.rowRecs, v.rowAt, v.rowChunks = nil, nil, nil
}

// tombstone marks the record id as expired.
func (v *IdemView) tombstone(id string) {
	t := TombstoneID(id)
	if full := v.filter.add(t); full >= 0 && v.rmOn {
		v.rmWrites = append(v.rmWrites, v.filter.segRows(full)...)
	}
	if v.onTomb != nil {
		v.onTomb(t)
		return
	}
	if !v.Tombstones[t] {
		v.Tombstones[t] = true
		v.tombs = append(v.tombs, t)
	}
}

// drainTombs returns the tombstones made since the last drain (the batch's
// read-model writes) and forgets those of the drain before, on disk now.
func (v *IdemView) drainTombs() []string {
	for _, t := range v.lastTombs {
		delete(v.Tombstones, t)
	}
	out := v.tombs
	v.lastTombs, v.tombs = v.tombs, nil
	return out
}

// tombsWritten forgets every tombstone held in memory: the read model on
// disk holds them.
func (v *IdemView) tombsWritten() {
	v.Tombstones, v.tombs, v.lastTombs = map[string]bool{}, nil, nil
}

// drop removes the record of id (expired) and tombstones it. A record
// that is not the one entry e recorded stays named by a later entry of
// the order until that one expires too: dropped tells captures.
func (v *IdemView) drop(id string, r *IdemRecord, e *IdemRecord) {
	delete(v.Records, id)
	v.tombstone(id)
	v.rowDel(r.Seq)
	if e != nil && e != r {
		v.rowDel(e.Seq)
	}
	if r != e {
		if v.dropped == nil {
			v.dropped = map[string]*IdemRecord{}
		}
		v.dropped[id] = r
	}
}

// expire turns every record older than retention at headAt into a
// tombstone. Records arrive in time order, so this pops from the front.
func (v *IdemView) expire(headAt, retention int64) {
	if v.loaded == nil || v.expireLoaded(headAt, retention) {
		v.expireFront(headAt, retention)
	}
}

func (v *IdemView) expireFront(headAt, retention int64) {
	n := 0
	for n < len(v.Order) {
		e := v.Order[n]
		r := v.Records[e.ID]
		if r != nil && r.At+retention > headAt {
			break
		}
		if r != nil {
			v.drop(e.ID, r, e.Rec)
		} else {
			if e.Rec != nil {
				v.rowDel(e.Rec.Seq)
			}
			if d := v.dropped[e.ID]; d != nil && d == e.Rec {
				delete(v.dropped, e.ID) // no entry names it any more
			}
		}
		n++
	}
	if n > 0 {
		v.Order = v.Order[n:] // the backing array is reclaimed as append moves it
		v.expiredSince += n
		if v.expiredSince > 4096 && v.expiredSince > 2*len(v.Records) {
			v.shrink()
		}
	}
}

// shrink lets go of what expired records leave behind when most of them
// expired since the last time: the front of the order's backing array,
// which still names them until an append moves it (a new array: captures
// may share the old one), and the room of the map (a map never shrinks).
func (v *IdemView) shrink() {
	v.Order = slices.Clone(v.Order)
	records := make(map[string]*IdemRecord, len(v.Records))
	for id, r := range v.Records {
		records[id] = r
	}
	v.Records, v.expiredSince = records, 0
}
