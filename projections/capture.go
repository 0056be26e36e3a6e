package projections

import (
	"sort"

	"taskledger/ledger"
)

// Capture is a copy of the event-derived projections that shares nothing
// the sequencer mutates. Taking it only copies (no encoding), so a running
// server takes it under the projections' read lock and encodes it outside
// any lock: the sequencer waits for the copy, not for the encoding.
type Capture struct {
	d stateDoc
}

// Capture copies the event-derived state (not soft state, not indexes).
// Idempotency records are shared: a record never changes once recorded.
func (s *State) Capture() *Capture {
	d := stateDoc{Head: s.Head, ServerClaims: s.ServerClaims,
		Order:   cloneSlice(s.Idem.Order),
		Tasks:   make([]*Task, 0, len(s.Tasks)),
		Devices: make([]*Device, 0, len(s.Devices)),
		Records: make([]*IdemRecord, 0, len(s.Idem.Records)),
	}
	d.Head.Hash = append([]byte(nil), s.Head.Hash...)
	for _, t := range s.Tasks {
		d.Tasks = append(d.Tasks, t.clone())
	}
	for _, dv := range s.Devices {
		d.Devices = append(d.Devices, dv.clone())
	}
	for _, r := range s.Idem.Records {
		d.Records = append(d.Records, r)
	}
	d.Tombstones = make([]string, 0, len(s.Idem.Tombstones))
	for t := range s.Idem.Tombstones {
		d.Tombstones = append(d.Tombstones, t)
	}
	return &Capture{d: d}
}

// Head is the position the capture covers.
func (c *Capture) Head() ledger.Head { return c.d.Head }

// Encode returns the canonical bytes of the captured projections: the same
// bytes State.Canonical gives for the state it was captured from. Structs
// are encoded as arrays (ledger.MarshalArrays): smaller and faster, and a
// struct that changed shape without a SchemaVersion bump makes older
// snapshots fail to decode (refused, rebuilt) instead of loading zeros.
func (c *Capture) Encode() ([]byte, error) {
	d := &c.d
	sort.Slice(d.Tasks, func(i, j int) bool { return d.Tasks[i].ID < d.Tasks[j].ID })
	sort.Slice(d.Devices, func(i, j int) bool { return d.Devices[i].ID < d.Devices[j].ID })
	sort.Slice(d.Records, func(i, j int) bool {
		return IdemID(d.Records[i].Scope, d.Records[i].Key) < IdemID(d.Records[j].Scope, d.Records[j].Key)
	})
	sort.Strings(d.Tombstones)
	if len(d.Tasks) == 0 {
		d.Tasks = nil
	}
	if len(d.Devices) == 0 {
		d.Devices = nil
	}
	if len(d.Records) == 0 {
		d.Records = nil
	}
	if len(d.Tombstones) == 0 {
		d.Tombstones = nil
	}
	return ledger.MarshalArrays(d)
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

func cloneSlice[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}

// clone copies a task deeply (every field below is a value, a string, or
// copied here; TestCaptureSharesNothing checks none is forgotten).
func (t *Task) clone() *Task {
	c := *t
	c.Image = clonePtr(t.Image)
	if t.Auth != nil {
		a := *t.Auth
		c.Auth = &a
	}
	c.Claim = clonePtr(t.Claim)
	c.Exec = clonePtr(t.Exec)
	c.Result = clonePtr(t.Result)
	c.Failure = clonePtr(t.Failure)
	c.Recovery = clonePtr(t.Recovery)
	c.LateReports = cloneSlice(t.LateReports)
	c.Evidence = cloneSlice(t.Evidence)
	return &c
}

func (d *Device) clone() *Device {
	c := *d
	c.RequiredChecks = cloneSlice(d.RequiredChecks)
	return &c
}
