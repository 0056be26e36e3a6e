package projections

import (
	"cmp"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"sync"
	"taskledger/wire"
	"unsafe"

	"taskledger/ledger"
)

// # Content encoding (version 10)
//
// The canonical bytes of the projections (State.Canonical, a snapshot's
// content) are a compact binary encoding written by hand for the types of
// this package, so that a million-task snapshot loads in well under a
// second: no reflection, every string of the loaded projections a
// substring of one copy of the content, small values allocated in chunks,
// and the sections decoded in parallel.
//
//	magic        8 bytes "TLPROJ10"
//	head         seq (uvarint), hash (bytes), at (varint)
//	server_claims uvarint
//	4 sections   each a uvarint length and its bytes:
//	  tasks      count, then 4 chunks (a uvarint length and its bytes,
//	             each with its own interned strings and deltas) of the
//	             tasks in creation order (create_seq, id), a quarter each
//	  devices    count, then every device by id
//	  idem       the idempotency records by id and their expiry order
//	             (contentidem.go); a start keeps them encoded and decodes
//	             one when it is looked up. A snapshot of projections with
//	             a read model names each record by its seq, and the
//	             record is its row in the read model (D462)
//	  tombstones count, then the sorted 32-byte tombstone ids, back to back;
//	             then the filter of every tombstone: its segment count, how
//	             many leading full segments are left to the read model's
//	             rows (a snapshot of projections with a read model: all
//	             full ones, D464; else none), and each other segment's
//	             capacity, count and bits (tombfilter.go)
//	  admins     count, then every admin token the log names, by name
//	             (name, hash, status, role, created, revoked)
//
// Numbers are uvarints (signed ones zigzag varints); a string is a uvarint
// length and its bytes; nil and empty slices differ (length + 1, 0 for
// nil); optional values have a presence flag or bit. Strings that repeat
// (states, statuses, device ids, event types, codes) are interned per
// section: the uvarint index + 1 of an earlier one, or 0 and the string.
// Times are relative to a base in the same record (0 = the zero time,
// else the zigzag of the difference + 1); creation seqs and times of
// consecutive tasks and records are deltas. Every field of every type is
// written, in declaration order; TestContentRoundTrip fails when a field
// is added and not encoded here (which also needs a SchemaVersion bump).

const contentMagic = "TLPROJ10"

// Capture is a copy of the event-derived projections that shares nothing
// the sequencer mutates. Taking it copies what can change in place (the
// tasks not ended, the devices and admin tokens) and shares what cannot:
// the creation order and the ended tasks (an event on an ended task, which
// is always refused, folds into a copy: State.unshare), the idempotency
// records and tombstones, which are only appended and expired from the
// front (idemcapture.go). So its cost follows the open work and the
// fleet, not the history. The encoding runs outside any lock, on another
// goroutine.
type Capture struct {
	head         ledger.Head
	serverClaims uint64
	order        []*Task       // the creation order, shared: read only
	clones       []posTask     // the tasks not ended, copied
	devices      []*Device     // clones
	admins       []*AdminToken // copies
	idem         idemCapture
}

// Capture copies the event-derived state (not soft state, not indexes).
func (s *State) Capture() *Capture {
	c := &Capture{head: s.Head, serverClaims: s.ServerClaims,
		order:   s.shareOrder(),
		clones:  make([]posTask, len(s.unended)),
		devices: make([]*Device, 0, len(s.Devices)),
		idem:    s.Idem.capture(s.cfg.KeepSettled),
	}
	c.head.Hash = append([]byte(nil), s.Head.Hash...)
	for i, t := range s.unended {
		c.clones[i] = posTask{t.pos, t.clone()}
	}
	for _, dv := range s.Devices {
		c.devices = append(c.devices, dv.clone())
	}
	for _, a := range s.AdminTokens {
		c.admins = append(c.admins, clonePtr(a))
	}
	return c
}

// posTask is a copied task and its place in the creation order.
type posTask struct {
	pos int
	t   *Task
}

// tasks returns the captured tasks in creation order.
func (c *Capture) tasks() []*Task {
	ts := slices.Clone(c.order)
	for _, k := range c.clones {
		ts[k.pos] = k.t
	}
	return slices.DeleteFunc(ts, func(t *Task) bool { return t == nil }) // settled: on disk
}

// Head is the position the capture covers.
func (c *Capture) Head() ledger.Head { return c.head }

// Encode returns the canonical bytes of the captured projections: the same
// bytes State.Canonical gives for the state it was captured from, every
// idempotency record whole. The task and idempotency sections are encoded
// in parallel.
func (c *Capture) Encode() ([]byte, error) { return c.encode(false) }

// EncodeSnapshot returns the content of a snapshot of the captured
// projections: Encode's, except that when every record has its row in the
// read model (the bbolt file's projections) records are named by seq
// (D462). Restored, it equals Encode's once the read model is attached.
func (c *Capture) EncodeSnapshot() ([]byte, error) { return c.encode(c.idem.ref) }

func (c *Capture) encode(ref bool) ([]byte, error) {
	var tasks []byte
	var terr error
	var wg sync.WaitGroup
	wg.Go(func() { tasks, terr = encodeTasks(c.tasks()) })
	devices, derr := encodeDevices(c.devices)
	idem, ierr := encodeIdem(&c.idem, ref)
	tombs, serr := encodeTombstones(slices.Clone(c.idem.tombs), &c.idem.filter, ref) // sorted in place
	admins := encodeAdminTokens(c.admins)
	wg.Wait()
	for _, err := range []error{terr, derr, ierr, serr} {
		if err != nil {
			return nil, err
		}
	}
	e := newEncBuf(len(contentMagic) + 64 + len(tasks) + len(devices) + len(idem) + len(tombs) + len(admins) + 5*binaryMaxVarint)
	e.b = append(e.b, contentMagic...)
	e.uv(c.head.Seq)
	e.bytes(c.head.Hash)
	e.sv(c.head.At)
	e.uv(c.serverClaims)
	for _, sec := range [][]byte{tasks, devices, idem, tombs, admins} {
		e.uv(uint64(len(sec)))
		e.b = append(e.b, sec...)
	}
	return e.b, e.err
}

const binaryMaxVarint = 10

// Restore builds a State from canonical bytes (a snapshot's content). The
// content is copied once into a string that every string of the state
// refers to; the task section is decoded beside the others.
func Restore(b []byte, cfg Config) (*State, error) {
	return restore(string(b), cfg)
}

// RestoreOwned is Restore without the copy: the state's strings refer to
// b itself, so b must never change again (nor be reused) once it is
// passed: start-up hands over the buffer a snapshot file was read into.
func RestoreOwned(b []byte, cfg Config) (*State, error) {
	if len(b) == 0 {
		return restore("", cfg)
	}
	return restore(unsafe.String(&b[0], len(b)), cfg)
}

func restore(content string, cfg Config) (*State, error) {
	if !strings.HasPrefix(content, contentMagic) {
		return nil, fmt.Errorf("%w: %w: no content magic", ledger.ErrCorrupt, errContent)
	}
	d := &decBuf{s: content, p: len(contentMagic)}
	s := New(cfg)
	s.Head.Seq = d.uv()
	s.Head.Hash = d.bytes()
	s.Head.At = d.sv()
	s.ServerClaims = d.uv()
	var sec [5]string
	for i := range sec {
		sec[i] = d.raw(int(min(d.uv(), uint64(len(d.s)+1))))
	}
	if d.err == nil && d.p != len(d.s) {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: %w", ledger.ErrCorrupt, d.err)
	}
	var terr error
	var wg sync.WaitGroup
	wg.Go(func() { terr = s.decodeTasks(sec[0]) })
	err := s.decodeDevices(sec[1])
	if err == nil {
		err = s.Idem.decode(sec[2])
	}
	if err == nil {
		err = s.Idem.decodeTombstones(sec[3])
	}
	if err == nil {
		err = s.decodeAdminTokens(sec[4])
	}
	wg.Wait()
	if err == nil {
		err = terr
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ledger.ErrCorrupt, err)
	}
	s.rebuildDeviceIndex()
	s.settle() // a snapshot written before tasks settled holds them all
	return s, nil
}

// Task flags.
const (
	tfImage = 1 << iota
	tfAuth
	tfAuthSamePayload // the authorization's payload_sha256 is the task's
	tfClaim
	tfExec
	tfCancelRequested
	tfResult
	tfFailure
	tfRecovery
	tfAuthTakeover // the authorization names its takeover policy
)

// taskChunks is how many independent chunks the task section is cut
// into (each with its own interned strings and deltas), so a start decodes
// them in parallel.
const taskChunks = 4

// chunkBounds returns where chunk i of n tasks starts and ends.
func chunkBounds(n, i int) (int, int) { return n * i / taskChunks, n * (i + 1) / taskChunks }

func encodeTasks(tasks []*Task) ([]byte, error) {
	if !slices.IsSortedFunc(tasks, cmpTask) {
		slices.SortFunc(tasks, cmpTask)
	}
	e := newEncBuf(len(tasks)*320 + 64)
	e.uv(uint64(len(tasks)))
	for i := range taskChunks {
		lo, hi := chunkBounds(len(tasks), i)
		c, err := encodeTaskChunk(tasks[lo:hi])
		if err != nil {
			return nil, err
		}
		e.uv(uint64(len(c)))
		e.b = append(e.b, c...)
	}
	return e.b, e.err
}

func encodeTaskChunk(tasks []*Task) ([]byte, error) {
	e := newEncBuf(len(tasks) * 320)
	var seq uint64
	var at int64
	for i, t := range tasks {
		yieldEvery(i)
		e.str(t.ID)
		e.uv(t.CreateSeq - seq)
		e.sv(t.CreatedAt - at)
		seq, at = t.CreateSeq, t.CreatedAt
		base := t.CreatedAt
		e.tm(base, t.UpdatedAt)
		e.istr(string(t.State))
		e.uv(t.Version)
		e.uv(t.Revision)
		e.uv(t.StreamVersion)
		e.str(t.Payload)
		e.str(t.PayloadSHA256)
		e.uv(taskFlags(t))
		e.uv(t.Generation)
		e.uv(t.Executions)
		e.str(t.CancelReason)
		if im := t.Image; im != nil {
			e.str(im.SHA256)
			e.sv(im.Size)
		}
		if a := t.Auth; a != nil {
			e.str(a.ID)
			e.uv(a.Revision)
			if a.PayloadSHA256 != t.PayloadSHA256 {
				e.str(a.PayloadSHA256)
			}
			e.str(a.ImageSHA256)
			e.tm(base, a.ExpiresAt)
			e.istr(a.Status)
			e.tm(base, a.CreatedAt)
			if a.Takeover != "" {
				e.istr(a.Takeover)
			}
		}
		if c := t.Claim; c != nil {
			e.uv(c.Generation)
			e.istr(c.DeviceID)
			e.str(c.SessionID)
			e.tm(base, c.LeaseExpiresAt)
			e.istr(c.TokenOrigin)
			e.str(c.TokenHash)
			e.str(c.Nonce)
			e.str(c.AuthorizationID)
			e.tm(base, c.AuthorizationExpiresAt)
			e.tm(base, c.ClaimedAt)
		}
		if x := t.Exec; x != nil {
			e.str(x.ID)
			e.tm(base, x.StartedAt)
			e.tm(base, x.LeaseExpiresAt)
			e.istr(x.Step)
			e.tm(base, x.LastSeenAt)
			e.flag(x.Ended)
		}
		if t.Result != nil {
			e.str(*t.Result)
		}
		if fl := t.Failure; fl != nil {
			e.istr(fl.ReasonCode)
			e.str(fl.Detail)
		}
		if r := t.Recovery; r != nil {
			e.istr(r.Decision)
			e.str(r.Reason)
			e.tm(base, r.At)
		}
		e.count(len(t.LateReports), t.LateReports == nil)
		for _, l := range t.LateReports {
			e.tm(base, l.At)
			e.istr(l.DeviceID)
			e.uv(l.Generation)
			e.str(l.ExecutionID)
			e.istr(l.Outcome)
			e.str(l.Result)
			e.istr(l.ReasonCode)
			e.str(l.Detail)
		}
		e.count(len(t.Evidence), t.Evidence == nil)
		for _, v := range t.Evidence {
			e.str(v.ID)
			e.str(v.ExecutionID)
			e.str(v.SHA256)
			e.sv(v.Size)
			e.istr(v.Kind)
			e.tm(base, v.CapturedAt)
		}
	}
	return e.b, e.err
}

func taskFlags(t *Task) uint64 {
	var f uint64
	set := func(on bool, bit uint64) {
		if on {
			f |= bit
		}
	}
	set(t.Image != nil, tfImage)
	set(t.Auth != nil, tfAuth)
	set(t.Auth != nil && t.Auth.PayloadSHA256 == t.PayloadSHA256, tfAuthSamePayload)
	set(t.Claim != nil, tfClaim)
	set(t.Exec != nil, tfExec)
	set(t.CancelRequested, tfCancelRequested)
	set(t.Result != nil, tfResult)
	set(t.Failure != nil, tfFailure)
	set(t.Recovery != nil, tfRecovery)
	set(t.Auth != nil && t.Auth.Takeover != "", tfAuthTakeover)
	return f
}

func cmpTask(a, b *Task) int {
	if c := cmp.Compare(a.CreateSeq, b.CreateSeq); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// decodeTasks decodes the task section: its chunks in parallel, each
// into its part of one array of tasks with its claim index entries; the
// map is filled chunk by chunk as they finish.
func (s *State) decodeTasks(sec string) error {
	d := &decBuf{s: sec}
	n := d.n()
	var chunks [taskChunks]string
	for i := range chunks {
		chunks[i] = d.raw(int(min(d.uv(), uint64(len(d.s)+1))))
	}
	if d.err == nil && d.p != len(d.s) {
		d.fail("trailing bytes after the tasks")
	}
	if d.err != nil || n > len(sec) {
		d.fail("task count")
		return d.err
	}
	tasks := make([]Task, n)
	s.Tasks = make(map[string]*Task, n)
	s.taskOrder = make([]*Task, n)
	var errs [taskChunks]error
	var done [taskChunks]chan struct{}
	var idx [taskChunks]taskIndexes
	for i := range chunks {
		done[i] = make(chan struct{})
		go func() {
			defer close(done[i])
			lo, hi := chunkBounds(n, i)
			errs[i] = s.decodeTaskChunk(chunks[i], tasks[lo:hi], s.taskOrder[lo:hi], &idx[i])
		}()
	}
	var wg sync.WaitGroup
	var ierr error
	wg.Go(func() { // the map, chunk by chunk as they finish
		for i := range chunks {
			<-done[i]
			if errs[i] != nil {
				return
			}
			lo, hi := chunkBounds(n, i)
			for j := lo; j < hi; j++ {
				s.Tasks[tasks[j].ID] = &tasks[j]
			}
		}
	})
	for i := range chunks {
		<-done[i]
		if ierr == nil {
			ierr = errs[i]
		}
		if lo, hi := chunkBounds(n, i); ierr == nil && lo > 0 && lo < hi && cmpTask(&tasks[lo-1], &tasks[lo]) >= 0 {
			ierr = fmt.Errorf("%w: tasks out of order", errContent)
		}
	}
	if ierr == nil {
		s.joinTaskIndexes(idx[:])
	}
	wg.Wait()
	if ierr == nil && len(s.Tasks) != n {
		ierr = fmt.Errorf("%w: duplicate task id", errContent)
	}
	return ierr
}

// decodeTaskChunk decodes one chunk of the task section into tasks, and
// their claim index entries into idx.
func (s *State) decodeTaskChunk(sec string, tasks []Task, order []*Task, idx *taskIndexes) error {
	d := &decBuf{s: sec}
	// Pending tasks are queued: room for all (the part not used is never
	// touched), instead of growing a queue of a million by copies.
	idx.queue = make(taskQueue, 0, len(tasks))
	var (
		images    slab[Blob]
		auths     slab[Authorization]
		claims    slab[Claim]
		execs     slab[Execution]
		results   slab[string]
		failures  slab[Failure]
		recovered slab[Recovery]
		seq       uint64
		at        int64
	)
	for i := range tasks {
		t := &tasks[i]
		t.ID = d.str()
		seq += d.uv()
		at += d.sv()
		t.CreateSeq, t.CreatedAt = seq, at
		if i > 0 && seq == tasks[i-1].CreateSeq && t.ID <= tasks[i-1].ID {
			d.fail("tasks out of order")
		}
		base := at
		t.UpdatedAt = d.tm(base)
		t.State = wire.State(d.istr())
		t.Version = d.uv()
		t.Revision = d.uv()
		t.StreamVersion = d.uv()
		t.Payload = d.str()
		t.PayloadSHA256 = d.str()
		f := d.uv()
		t.Generation = d.uv()
		t.Executions = d.uv()
		t.CancelReason = d.str()
		t.CancelRequested = f&tfCancelRequested != 0
		if f&tfImage != 0 {
			im := images.next()
			im.SHA256 = d.str()
			im.Size = d.sv()
			t.Image = im
		}
		if f&tfAuth != 0 {
			a := auths.next()
			a.ID = d.str()
			a.Revision = d.uv()
			if f&tfAuthSamePayload != 0 {
				a.PayloadSHA256 = t.PayloadSHA256
			} else {
				a.PayloadSHA256 = d.str()
			}
			a.ImageSHA256 = d.str()
			a.ExpiresAt = d.tm(base)
			a.Status = d.istr()
			a.CreatedAt = d.tm(base)
			if f&tfAuthTakeover != 0 {
				a.Takeover = d.istr()
			}
			t.Auth = a
		} else if f&tfAuthSamePayload != 0 {
			d.fail("task flags")
		}
		if f&tfClaim != 0 {
			c := claims.next()
			c.Generation = d.uv()
			c.DeviceID = d.istr()
			c.SessionID = d.str()
			c.LeaseExpiresAt = d.tm(base)
			c.TokenOrigin = d.istr()
			c.TokenHash = d.str()
			c.Nonce = d.str()
			c.AuthorizationID = d.str()
			c.AuthorizationExpiresAt = d.tm(base)
			c.ClaimedAt = d.tm(base)
			t.Claim = c
		}
		if f&tfExec != 0 {
			x := execs.next()
			x.ID = d.str()
			x.StartedAt = d.tm(base)
			x.LeaseExpiresAt = d.tm(base)
			x.Step = d.istr()
			x.LastSeenAt = d.tm(base)
			x.Ended = d.flag()
			t.Exec = x
		}
		if f&tfResult != 0 {
			r := results.next()
			*r = d.str()
			t.Result = r
		}
		if f&tfFailure != 0 {
			fl := failures.next()
			fl.ReasonCode = d.istr()
			fl.Detail = d.str()
			t.Failure = fl
		}
		if f&tfRecovery != 0 {
			r := recovered.next()
			r.Decision = d.istr()
			r.Reason = d.str()
			r.At = d.tm(base)
			t.Recovery = r
		}
		if f >= tfAuthTakeover<<1 || (f&tfAuthTakeover != 0 && f&tfAuth == 0) {
			d.fail("task flags")
		}
		if k := d.count(); k >= 0 {
			t.LateReports = make([]LateReport, k)
			for j := range t.LateReports {
				l := &t.LateReports[j]
				l.At = d.tm(base)
				l.DeviceID = d.istr()
				l.Generation = d.uv()
				l.ExecutionID = d.str()
				l.Outcome = d.istr()
				l.Result = d.str()
				l.ReasonCode = d.istr()
				l.Detail = d.str()
			}
		}
		if k := d.count(); k >= 0 {
			t.Evidence = make([]Evidence, k)
			for j := range t.Evidence {
				v := &t.Evidence[j]
				v.ID = d.str()
				v.ExecutionID = d.str()
				v.SHA256 = d.str()
				v.Size = d.sv()
				v.Kind = d.istr()
				v.CapturedAt = d.tm(base)
			}
		}
		if d.err != nil {
			return d.err
		}
		order[i] = t
		idx.index(t)
	}
	if d.p != len(d.s) {
		d.fail("trailing bytes after a task chunk")
	}
	return d.err
}

func encodeDevices(devices []*Device) ([]byte, error) {
	slices.SortFunc(devices, func(a, b *Device) int { return strings.Compare(a.ID, b.ID) })
	e := newEncBuf(len(devices) * 256)
	e.uv(uint64(len(devices)))
	for _, v := range devices {
		e.str(v.ID)
		e.str(v.OwnerID)
		e.str(v.Name)
		e.flag(v.HasChecks)
		e.count(len(v.RequiredChecks), v.RequiredChecks == nil)
		for _, c := range v.RequiredChecks {
			e.istr(c)
		}
		e.str(v.TokenHash)
		e.istr(v.Status)
		e.sv(v.RegisteredAt)
		e.tm(v.RegisteredAt, v.RevokedAt)
		e.str(v.RevokeReason)
		e.str(v.OpenTask)
		e.uv(v.StreamVersion)
	}
	return e.b, e.err
}

func (s *State) decodeDevices(sec string) error {
	d := &decBuf{s: sec}
	n := d.n()
	list := make([]Device, n)
	s.Devices = make(map[string]*Device, n)
	for i := range list {
		v := &list[i]
		v.ID = d.str()
		if i > 0 && v.ID <= list[i-1].ID {
			d.fail("devices out of order")
		}
		v.OwnerID = d.str()
		v.Name = d.str()
		v.HasChecks = d.flag()
		if k := d.count(); k >= 0 {
			v.RequiredChecks = make([]string, k)
			for j := range v.RequiredChecks {
				v.RequiredChecks[j] = d.istr()
			}
		}
		v.TokenHash = d.str()
		v.Status = d.istr()
		v.RegisteredAt = d.sv()
		v.RevokedAt = d.tm(v.RegisteredAt)
		v.RevokeReason = d.str()
		v.OpenTask = d.str()
		v.StreamVersion = d.uv()
		if d.err != nil {
			return d.err
		}
		s.Devices[v.ID] = v
	}
	if d.p != len(d.s) {
		d.fail("trailing bytes after the devices")
	}
	return d.err
}

func encodeAdminTokens(admins []*AdminToken) []byte {
	slices.SortFunc(admins, func(a, b *AdminToken) int { return strings.Compare(a.Name, b.Name) })
	e := newEncBuf(len(admins) * 128)
	e.uv(uint64(len(admins)))
	for _, a := range admins {
		e.str(a.Name)
		e.str(a.TokenHash)
		e.istr(a.Status)
		e.istr(string(a.Role))
		e.sv(a.CreatedAt)
		e.str(a.CreatedBy)
		e.tm(a.CreatedAt, a.RevokedAt)
		e.str(a.RevokedBy)
		e.str(a.RevokeReason)
		e.uv(a.StreamVersion)
	}
	return e.b
}

func (s *State) decodeAdminTokens(sec string) error {
	d := &decBuf{s: sec}
	n := d.n()
	list := make([]AdminToken, n)
	s.AdminTokens = make(map[string]*AdminToken, n)
	for i := range list {
		a := &list[i]
		a.Name = d.str()
		if i > 0 && a.Name <= list[i-1].Name {
			d.fail("admin tokens out of order")
		}
		a.TokenHash = d.str()
		a.Status = d.istr()
		a.Role = wire.Role(d.istr())
		a.CreatedAt = d.sv()
		a.CreatedBy = d.str()
		a.RevokedAt = d.tm(a.CreatedAt)
		a.RevokedBy = d.str()
		a.RevokeReason = d.str()
		a.StreamVersion = d.uv()
		if d.err != nil {
			return d.err
		}
		s.AdminTokens[a.Name] = a
	}
	if d.p != len(d.s) {
		d.fail("trailing bytes after the admin tokens")
	}
	return d.err
}

// TombstoneSize is the size of a tombstone id (a SHA-256).
const TombstoneSize = sha256.Size

// encodeTombstones writes the tombstone section: the tombstones held in
// memory when nothing drains them (KeepSettled; sorted, deduplicated), then
// the filter of every tombstone (tombfilter.go).
func encodeTombstones(added []string, f *tombFilter, onDisk bool) ([]byte, error) {
	slices.Sort(added)
	added = slices.Compact(added)
	e := newEncBuf(len(added)*TombstoneSize + binaryMaxVarint)
	e.uv(uint64(len(added)))
	for _, t := range added {
		if len(t) != TombstoneSize {
			e.fail("tombstone of %d bytes", len(t))
			return nil, e.err
		}
		e.b = append(e.b, t...)
	}
	filter, err := f.encode(onDisk)
	if err != nil {
		return nil, err
	}
	e.b = append(e.b, filter...)
	return e.b, e.err
}

func (v *IdemView) decodeTombstones(sec string) error {
	d := &decBuf{s: sec}
	n := d.uv()
	if n > uint64(len(d.s))/TombstoneSize {
		d.fail("tombstone count")
		return d.err
	}
	all := d.raw(int(n) * TombstoneSize)
	for i := 1; i < int(n); i++ {
		if all[(i-1)*TombstoneSize:i*TombstoneSize] >= all[i*TombstoneSize:(i+1)*TombstoneSize] {
			d.fail("tombstones out of order")
			break
		}
	}
	if d.err != nil {
		return d.err
	}
	for i := range int(n) {
		t := all[i*TombstoneSize : (i+1)*TombstoneSize]
		v.Tombstones[t] = true
		v.tombs = append(v.tombs, t)
	}
	return v.filter.decode(d.s[d.p:])
}
